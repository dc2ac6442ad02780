package devcontainer

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzCompose feeds arbitrary bytes as the repository's Compose file:
// Load never panics, and whatever it accepts holds no value Compose would
// interpolate (Contract: Preloaded service images, interpolated values
// are rejected before startup).
func FuzzCompose(f *testing.F) {
	f.Add([]byte(goodCompose))
	f.Add([]byte("include: [a.yaml]\nservices: {app: {image: x}}\n"))
	f.Add([]byte("services:\n  app:\n    image: ${X:-y}\n"))
	f.Add([]byte("services:\n  app:\n    environment: [\"A=$${x}\"]\n"))
	f.Add([]byte("x-a: &a {image: x}\nservices:\n  app: *a\n"))
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".devcontainer.json"), []byte(`{"dockerComposeFile": "compose.yaml", "service": "app"}`), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, compose []byte) {
		if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), compose, 0o644); err != nil {
			t.Fatal(err)
		}
		in, err := Load(context.Background(), dir)
		if err != nil {
			return
		}
		for name, s := range in.Project.Services {
			if interpolated(s.Image) {
				t.Fatalf("accepted interpolated image %q of %s", s.Image, name)
			}
			for k, v := range s.Environment {
				if interpolated(k) || v != nil && interpolated(*v) {
					t.Fatalf("accepted interpolated environment %s=%v of %s", k, v, name)
				}
			}
		}
	})
}
