package inbox_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// prepare begins an offload and sends a stream with only env.json, with
// --prepare: the environment step runs, no CLI starts.
func (e *env) prepare(key, envJSON string) {
	e.t.Helper()
	e.mustVerb(nil, "begin", "--repo", key, "--name", key, "--kind", "claude", "--id", "off1", "--no-repo")
	e.mustVerb(tarOf(e.t, [2]string{"env.json", envJSON}), "send", "--repo", key, "--kind", "claude", "--id", "off1", "--prepare", "--no-repo")
}

func (e *env) report(args ...string) map[string]any {
	e.t.Helper()
	resp := e.mustVerb(nil, append([]string{"env", "--json"}, args...)...)
	rep, _ := resp["report"].(map[string]any)
	return rep
}

func toolOf(rep map[string]any, name string) map[string]any {
	for _, t := range rep["tools"].([]any) {
		if t.(map[string]any)["tool"] == name {
			return t.(map[string]any)
		}
	}
	return nil
}

// Contract: Offload, Environment: a tool through a reachable registry
// (npm) ends ready; a core tool that cannot be fetched here (go, from its
// own site) ends failed with the reason; env reports each with its wanted
// version and source. Real mise.
func TestEnvStepReadyAndFailed(t *testing.T) {
	if _, err := exec.LookPath("mise"); err != nil {
		t.Fatalf("mise is missing on this host (make setup installs it): %v", err)
	}
	e := newEnv(t)
	e.prepare("env1", `{"v":1,"tools":{"npm:cowsay":"1.6.0","go":"1.26.5"},"package_managers":{},"files":[],"lockfiles":["go.sum"]}`)
	rep := e.report("--repo", "env1")
	if rep["done"] != true || rep["outcome"] != "failed" {
		t.Fatalf("report: %v", rep)
	}
	cow := toolOf(rep, "npm:cowsay")
	if cow["outcome"] != "ready" || cow["installed"] != "1.6.0" || cow["wanted"] != "1.6.0" || cow["source"] != "env.json tools" {
		t.Errorf("npm:cowsay: %v", cow)
	}
	goTool := toolOf(rep, "go")
	// The reason is mise's own words, which differ with its cache and the
	// way the fetch failed (a DNS error, or a version list it could not
	// read): the step must name the command that failed, not one wording.
	if goTool["outcome"] != "failed" || !strings.Contains(fmt.Sprint(goTool["reason"]), "mise install go@1.26.5") {
		t.Errorf("go: %v (want failed, naming mise install go@1.26.5)", goTool)
	}
	if ls := rep["lockfiles"].([]any); len(ls) != 1 || ls[0].(map[string]any)["outcome"] != "failed" {
		t.Errorf("lockfiles: %v", rep["lockfiles"])
	}
	// The text form names each tool and outcome.
	cmd := exec.Command(filepath.Join(e.bin, "cocoonbox-agent"), "offload", "env", "--repo", "env1", "--no-wait")
	out, _ := cmd.Output()
	for _, want := range []string{"environment step: failed", "npm:cowsay", "ready", "go", "failed", "go mod download"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

// An inbox restart mid-step ends the step failed: the new inbox does not
// run it, so its unfinished report is failed at once.
func TestEnvStepCutShortByARestartIsFailed(t *testing.T) {
	if _, err := exec.LookPath("mise"); err != nil {
		t.Fatalf("mise is missing on this host (make setup installs it): %v", err)
	}
	// A registry on loopback that accepts and never answers holds npm (and
	// so the step) for as long as the test wants.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Setenv("NPM_CONFIG_REGISTRY", "http://"+ln.Addr().String()+"/")
	e := newEnv(t)
	e.prepare("env2", `{"v":1,"tools":{"npm:cowsay":"1.6.0"},"package_managers":{},"files":[],"lockfiles":[]}`)
	c := <-accepted // the step is now inside npm
	defer c.Close()
	if rep := e.report("--repo", "env2", "--no-wait"); rep["done"] != false {
		t.Fatalf("the step is not running: %v", rep)
	}
	e.kill()
	e.start()
	rep := e.report("--repo", "env2")
	if rep["done"] != true || rep["outcome"] != "failed" || !strings.Contains(fmt.Sprint(rep["reason"]), "cut short") {
		data, _ := json.Marshal(rep)
		t.Fatalf("after the restart: %s", data)
	}
}
