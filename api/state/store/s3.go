package store

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config says where an S3-compatible store is (api.yaml's state.s3).
type S3Config struct {
	// Endpoint is the service's origin: https://HOST[:PORT], or http:// (the
	// objects are sealed; their names and sizes then cross the network
	// readable).
	Endpoint string
	Bucket   string
	// Region is the bucket's region (signing needs it); empty is us-east-1.
	Region string
	// VirtualHosted addresses the bucket as BUCKET.HOST (AWS, R2); false is
	// path-style HOST/BUCKET (MinIO, Ceph, SeaweedFS, most self-hosted).
	VirtualHosted bool
	// CredentialsFile is an AWS shared credentials file (the format of
	// ~/.aws/credentials: aws_access_key_id, aws_secret_access_key and
	// optionally aws_session_token under [Profile]).
	CredentialsFile string
	Profile         string
	// CAFile, when set, is a PEM file of the only roots the endpoint's
	// certificate may chain to.
	CAFile string
}

// S3 is a Store in a bucket of an S3-compatible service, through
// minio-go (one module, S3's signing and presigning, the shared
// credentials file reader).
type S3 struct {
	c      *minio.Client
	bucket string
	name   string
}

// OpenS3 connects to cfg's service and checks that the bucket is there and
// the credentials may read it; every error names the setting concerned.
func OpenS3(ctx context.Context, cfg S3Config) (*S3, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("state.s3.endpoint: %q is not http(s)://HOST[:PORT]", cfg.Endpoint)
	}
	if _, err := os.Stat(cfg.CredentialsFile); err != nil {
		return nil, fmt.Errorf("state.s3.credentials_file: %w", err)
	}
	creds := credentials.NewFileAWSCredentials(cfg.CredentialsFile, cfg.Profile)
	if v, err := creds.GetWithContext(nil); err != nil || v.AccessKeyID == "" || v.SecretAccessKey == "" {
		return nil, fmt.Errorf("state.s3.credentials_file %s: no aws_access_key_id and aws_secret_access_key under [%s] (%v)", cfg.CredentialsFile, cfg.Profile, err)
	}
	tr, err := minio.DefaultTransport(u.Scheme == "https")
	if err != nil {
		return nil, err
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("state.s3.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("state.s3.ca_file %s: no PEM certificate in it", cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	lookup := minio.BucketLookupPath
	if cfg.VirtualHosted {
		lookup = minio.BucketLookupDNS
	}
	c, err := minio.New(u.Host, &minio.Options{Creds: creds, Secure: u.Scheme == "https", Region: region,
		BucketLookup: lookup, Transport: tr})
	if err != nil {
		return nil, fmt.Errorf("state.s3: %w", err)
	}
	ok, err := c.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("state.s3: bucket %q at %s: %w", cfg.Bucket, cfg.Endpoint, err)
	}
	if !ok {
		return nil, fmt.Errorf("state.s3.bucket: %q does not exist at %s (make it first)", cfg.Bucket, cfg.Endpoint)
	}
	return &S3{c: c, bucket: cfg.Bucket, name: "s3 " + cfg.Endpoint + "/" + cfg.Bucket}, nil
}

func (s *S3) String() string { return s.name }

func notFound(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.StatusCode == http.StatusNotFound || r.Code == "NoSuchKey"
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if len(data) > MaxObject {
		return fmt.Errorf("put %s: %d bytes: %w (%d)", key, len(data), ErrTooLarge, MaxObject)
	}
	_, err := s.c.PutObject(ctx, s.bucket, key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: "application/octet-stream", SendContentMd5: true})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// Sync implements Store: S3 answers a PUT once the object is durable.
func (s *S3) Sync(ctx context.Context) error { return nil }

// Get implements Store.
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	o, err := s.c.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	defer o.Close()
	data, err := io.ReadAll(io.LimitReader(o, MaxObject+1))
	if notFound(err) {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if len(data) > MaxObject {
		return nil, fmt.Errorf("get %s: %w (%d)", key, ErrTooLarge, MaxObject)
	}
	return data, nil
}

// Has implements Store.
func (s *S3) Has(ctx context.Context, key string) (bool, error) {
	if err := CheckKey(key); err != nil {
		return false, err
	}
	_, err := s.c.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	if notFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("has %s: %w", key, err)
	}
	return true, nil
}

// List implements Store.
func (s *S3) List(ctx context.Context, prefix string, fn func(string) error) error {
	if err := CheckPrefix(prefix); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends minio's listing goroutine when fn stops early
	for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			return fmt.Errorf("list %s: %w", prefix, o.Err)
		}
		if err := fn(o.Key); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := s.c.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil && !notFound(err) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// DeleteUser implements Store: a listing and batched deletes (S3 has no
// rename). A run cut short leaves the rest, which the next run removes.
func (s *S3) DeleteUser(ctx context.Context, uid string) error {
	prefix := UserPrefix(uid)
	if err := CheckPrefix(prefix); err != nil {
		return err
	}
	keys := make(chan minio.ObjectInfo)
	var listErr error
	go func() {
		defer close(keys)
		for o := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if o.Err != nil {
				listErr = o.Err
				return
			}
			keys <- o
		}
	}()
	var errs []error
	for e := range s.c.RemoveObjects(ctx, s.bucket, keys, minio.RemoveObjectsOptions{}) {
		errs = append(errs, fmt.Errorf("%s: %w", e.ObjectName, e.Err))
	}
	if listErr != nil {
		errs = append(errs, listErr)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("delete user %s: %w", uid, err)
	}
	return nil
}

// PresignGet implements Store.
func (s *S3) PresignGet(ctx context.Context, key string, expiry time.Duration) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	if err := checkExpiry(expiry); err != nil {
		return "", err
	}
	u, err := s.c.PresignedGetObject(ctx, s.bucket, key, expiry, nil)
	if err != nil {
		return "", fmt.Errorf("presign %s: %w", key, err)
	}
	return u.String(), nil
}

// PresignPut implements Store.
func (s *S3) PresignPut(ctx context.Context, key string, expiry time.Duration) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	if err := checkExpiry(expiry); err != nil {
		return "", err
	}
	u, err := s.c.PresignedPutObject(ctx, s.bucket, key, expiry)
	if err != nil {
		return "", fmt.Errorf("presign %s: %w", key, err)
	}
	return u.String(), nil
}
