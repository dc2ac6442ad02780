package branchbox

import (
	"regexp"
	"strings"
)

// MaxEnvironmentName bounds a variable name in bytes.
const MaxEnvironmentName = 64

var envNameRe = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// reservedNames are exact names a lease may not set or inherit, by family
// (Contract: Security contract, "reject shell, loader, Git-control,
// container supervisor, and BranchBox control variables").
var reservedNames = map[string]string{
	// shell: they change what a shell runs, where, or as what
	"PATH": "shell", "HOME": "shell", "SHELL": "shell", "ENV": "shell", "BASH_ENV": "shell",
	"IFS": "shell", "CDPATH": "shell", "PS1": "shell", "PS2": "shell", "PS4": "shell",
	"PROMPT_COMMAND": "shell", "SHELLOPTS": "shell", "BASHOPTS": "shell", "GLOBIGNORE": "shell",
	"HISTFILE": "shell", "USER": "shell", "LOGNAME": "shell", "PWD": "shell", "OLDPWD": "shell",
	"TMPDIR": "shell", "TERM": "shell", "TERMINFO": "shell", "EDITOR": "shell", "VISUAL": "shell",
	"PAGER": "shell", "LANG": "shell", "LANGUAGE": "shell", "MAIL": "shell",
	// loader: code injected into every process or interpreter
	"NODE_OPTIONS": "loader", "NODE_PATH": "loader", "PYTHONPATH": "loader", "PYTHONSTARTUP": "loader",
	"PYTHONHOME": "loader", "PERL5LIB": "loader", "PERL5OPT": "loader", "RUBYOPT": "loader",
	"RUBYLIB": "loader", "JAVA_TOOL_OPTIONS": "loader", "_JAVA_OPTIONS": "loader", "GCONV_PATH": "loader",
	"MALLOC_CHECK_": "loader", "GLIBC_TUNABLES": "loader",
	// container supervisor and service manager
	"NOTIFY_SOCKET": "container supervisor", "LISTEN_FDS": "container supervisor",
	"LISTEN_PID": "container supervisor", "LISTEN_FDNAMES": "container supervisor",
	"INVOCATION_ID": "container supervisor", "JOURNAL_STREAM": "container supervisor",
	"XDG_RUNTIME_DIR": "container supervisor", "SSH_AUTH_SOCK": "container supervisor",
	"KUBECONFIG": "container supervisor", "CONTAINER_HOST": "container supervisor",
}

// reservedPrefixes are name prefixes refused by family.
var reservedPrefixes = []struct{ prefix, family string }{
	{"LD_", "loader"}, {"BASH_FUNC_", "shell"}, {"GIT_", "Git-control"},
	{"DOCKER_", "container supervisor"}, {"COMPOSE_", "container supervisor"},
	{"CONTAINERD_", "container supervisor"}, {"BUILDKIT_", "container supervisor"},
	{"PODMAN_", "container supervisor"}, {"SYSTEMD_", "container supervisor"},
	{"DBUS_", "container supervisor"}, {"DEVCONTAINER_", "container supervisor"},
	{"REMOTE_CONTAINERS_", "container supervisor"}, {"BRANCHBOX_", "BranchBox control"},
}

// CheckEnvironmentName says why name may not be an environment name of a
// lease, or "" when it may: bounded uppercase syntax ([A-Z][A-Z0-9_]*, at
// most MaxEnvironmentName bytes), and not a shell, loader, Git-control,
// container supervisor or BranchBox control variable (Contract: Security
// contract).
func CheckEnvironmentName(name string) string {
	if len(name) == 0 || len(name) > MaxEnvironmentName || !envNameRe.MatchString(name) {
		return "is not an environment name: [A-Z][A-Z0-9_]*, at most 64 bytes"
	}
	if family, ok := reservedNames[name]; ok {
		return "is a " + family + " variable; it is refused"
	}
	for _, r := range reservedPrefixes {
		if strings.HasPrefix(name, r.prefix) {
			return "is a " + r.family + " variable (" + r.prefix + "*); it is refused"
		}
	}
	return ""
}
