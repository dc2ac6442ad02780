package offload

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The secrets' layout on the tmpfs (Contract: Offload, Secrets, whose
// table was lost: ours, and the host packer's stream uses the same member
// names under secrets/):
//
//	aws/credentials, aws/config  AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE
//	kube/config                  KUBECONFIG
//	gcloud/...                   CLOUDSDK_CONFIG (the directory)
//	ssh/<key name>               GIT_SSH_COMMAND (ssh -i each key, IdentitiesOnly)
//	file/<repo path>             the copy's <repo path> becomes a link to it
//
// The variables name files only: a secret's value is never in an
// environment variable, argv or a log.

// SecretEnv is the tmux environment for the secrets placed in dir.
func SecretEnv(dir string) []string {
	var env []string
	exists := func(p string) bool { _, err := os.Stat(filepath.Join(dir, p)); return err == nil }
	if exists("aws/credentials") {
		env = append(env, "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "aws/credentials"))
	}
	if exists("aws/config") {
		env = append(env, "AWS_CONFIG_FILE="+filepath.Join(dir, "aws/config"))
	}
	if exists("kube/config") {
		env = append(env, "KUBECONFIG="+filepath.Join(dir, "kube/config"))
	}
	if exists("gcloud") {
		env = append(env, "CLOUDSDK_CONFIG="+filepath.Join(dir, "gcloud"))
	}
	if keys, _ := os.ReadDir(filepath.Join(dir, "ssh")); len(keys) > 0 {
		cmd := "ssh -o IdentitiesOnly=yes"
		for _, k := range keys {
			cmd += " -i " + filepath.Join(dir, "ssh", k.Name())
		}
		env = append(env, "GIT_SSH_COMMAND="+cmd)
	}
	sort.Strings(env)
	return env
}

// SecretMember checks a stream member's name under secrets/ and returns
// its path relative to the repo's secrets directory.
func SecretMember(rel string) (string, error) {
	parts := strings.SplitN(rel, "/", 2)
	if len(parts) != 2 || parts[1] == "" {
		return "", fmt.Errorf("secret %q: must be aws/credentials, aws/config, kube/config, gcloud/<file>, ssh/<key name> or file/<repo path>", rel)
	}
	switch parts[0] {
	case "aws":
		if parts[1] != "credentials" && parts[1] != "config" {
			return "", fmt.Errorf("secret %q: aws takes credentials and config only", rel)
		}
	case "kube":
		if parts[1] != "config" {
			return "", fmt.Errorf("secret %q: kube takes config only", rel)
		}
	case "ssh":
		if strings.Contains(parts[1], "/") {
			return "", fmt.Errorf("secret %q: an ssh key is one file name", rel)
		}
	case "gcloud", "file":
	default:
		return "", fmt.Errorf("secret %q: unknown kind %q (aws, kube, gcloud, ssh, file)", rel, parts[0])
	}
	return rel, nil
}

// WipeSecrets removes the repo's secrets directory from the tmpfs and the
// links that point into it from the copy.
func WipeSecrets(p Paths, key, name string) error {
	dir := p.RepoSecrets(key)
	filesDir := filepath.Join(dir, "file")
	if name != "" {
		filepath.WalkDir(filesDir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(filesDir, path)
			link := filepath.Join(p.Copy(name), rel)
			if t, err := os.Readlink(link); err == nil && t == path {
				os.Remove(link)
			}
			return nil
		})
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("wipe the secrets of %s: %w", key, err)
	}
	return nil
}
