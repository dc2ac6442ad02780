package egress

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"
)

// CA is a pool's interception CA: the leaf certificate the proxy shows a
// box for a listed host is signed by it, and the box's image trusts its
// certificate (Contract: Key vault; docs/boxes.md, "The local supervisor": Key injection).
type CA struct {
	cert   *x509.Certificate
	key    crypto.Signer
	leaves sync.Map // host name → *leaf
}

type leaf struct {
	cert  *tls.Certificate
	renew time.Time
}

// Leaf validity: a day, renewed at half of it, so a cached leaf never
// nears its expiry on a box whose clock is a little off.
const (
	leafLife  = 24 * time.Hour
	leafRenew = leafLife / 2
)

// NewCAPEM makes a CA (ECDSA P-256, ten years) and returns its
// certificate and PKCS#8 key, both PEM.
func NewCAPEM() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "cocoonbox pool egress CA"},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	k, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k}), nil
}

// ParseCA reads a CA NewCAPEM made; an error names what is wrong.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("egress CA: the certificate is not a CA")
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("egress CA: the key cannot sign")
	}
	return &CA{cert: cert, key: key}, nil
}

// Certificate is the CA's certificate (what a box trusts).
func (c *CA) Certificate() *x509.Certificate { return c.cert }

// leafFor returns a leaf for host from the cache, minting one when there
// is none or it is past half its life.
func (c *CA) leafFor(host string) (*tls.Certificate, error) {
	now := time.Now()
	if v, ok := c.leaves.Load(host); ok && now.Before(v.(*leaf).renew) {
		return v.(*leaf).cert, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.Add(leafLife),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	cert := &tls.Certificate{Certificate: [][]byte{der, c.cert.Raw}, PrivateKey: key}
	c.leaves.Store(host, &leaf{cert: cert, renew: now.Add(leafRenew)})
	return cert, nil
}
