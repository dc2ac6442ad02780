package login

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSaveIsPrivateAndLoadsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cfg", "cocoonbox", "cli.json")
	f, err := LoadConfig(path)
	if err != nil || len(f.Endpoints) != 0 {
		t.Fatalf("a missing file: %+v, %v", f, err)
	}
	f.Endpoint = "http://127.0.0.1:18200"
	f.Endpoints[f.Endpoint] = Saved{Token: "cb_x", Source: SourceBrowser}
	f.Endpoints["https://other"] = Saved{Token: "cb_y", Source: SourcePaste}
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("cli.json mode %v, %v; want 0600", st.Mode(), err)
	}
	if dst, _ := os.Stat(filepath.Dir(path)); dst.Mode().Perm() != 0o700 {
		t.Fatalf("its directory mode %v, want 0700", dst.Mode())
	}
	g, err := LoadConfig(path)
	if err != nil || g.Endpoint != f.Endpoint || g.Endpoints["https://other"].Source != SourcePaste || g.Endpoints[f.Endpoint].Token != "cb_x" {
		t.Fatalf("loaded %+v, %v", g, err)
	}
}

func TestPathIsUnderXDGConfigHome(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/x/cfg")
	if p, err := ConfigPath(); err != nil || p != "/x/cfg/cocoonbox/cli.json" {
		t.Fatalf("ConfigPath() = %q, %v", p, err)
	}
}

func TestLoadRefusesABrokenFileNamingIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cli.json")
	for _, text := range []string{"{not json", `{"endpoints":{"e":{"token":"t","source":"stolen"}}}`} {
		os.WriteFile(path, []byte(text), 0o600)
		if _, err := LoadConfig(path); err == nil {
			t.Fatalf("Load accepted %q", text)
		}
	}
}
