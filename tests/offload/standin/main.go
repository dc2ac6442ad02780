// Command standin behaves towards the offload inbox as the claude and
// codex CLIs do (issue 12: "a stand-in CLI in tests/"), where the real
// ones cannot run a turn without their services. Installed as claude or
// codex (its name picks which), it:
//
//   - takes the first prompt as its last argument, as both CLIs do;
//   - calls our hooks file's commands (claude, from --settings) with the
//     documented JSON payloads on stdin, or codex's notify program with
//     the payload as the last argv element;
//   - reads the terminal raw with bracketed paste on, so a paste is one
//     message and Enter submits it;
//   - acts on "standin:" lines in each message: commit, progress,
//     question, back (also on the box packer's "BACK: " instruction line,
//     once a message), hold (stay working until $HOME/.standin/release
//     exists), die (exit without a hook);
//   - answers "auth status" (claude) and "login status" (codex) signed in,
//     or signed out when $HOME/.standin/signed-out exists;
//   - records its argv, environment and every submitted message under
//     $HOME/.standin/ for the tests to read;
//   - writes its transcript where the real CLI does (claude:
//     ~/.claude/projects/<cwd, every non-alphanumeric as ->/), and calls
//     no hook while $HOME/.standin/no-hooks exists (hooks blocked by a
//     managed setting);
//   - stays starting (no prompt taken) while $HOME/.standin/hold-start
//     exists, and then drops what was typed meanwhile, as a TUI does.
//
// /exit (claude) or /quit (codex) ends it; claude then calls SessionEnd.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

var (
	cli      = filepath.Base(os.Args[0])
	home, _  = os.UserHomeDir()
	stateDir = filepath.Join(home, ".standin")
	settings string
	notify   []string
	session  = fmt.Sprintf("standin-%d", os.Getpid())
	turns    int
)

func main() {
	os.MkdirAll(stateDir, 0o700)
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		if cli == "codex" {
			fmt.Println("codex-cli 0.0.0-standin")
		} else {
			fmt.Println("0.0.0-standin (Claude Code)")
		}
		return
	}
	if len(os.Args) == 3 && (os.Args[1] == "auth" || os.Args[1] == "login") && os.Args[2] == "status" {
		authStatus()
		return
	}
	args := os.Args[1:]
	for i := 0; i < len(args)-1; i++ {
		switch args[i] {
		case "--settings":
			settings = args[i+1]
		case "-c":
			if v, ok := strings.CutPrefix(args[i+1], "notify="); ok {
				json.Unmarshal([]byte(v), &notify)
			}
		}
	}
	record("argv.json", os.Args)
	record("environ.json", os.Environ())
	if len(args) == 0 {
		fatal("no prompt")
	}
	prompt := args[len(args)-1]
	for hold := filepath.Join(stateDir, "hold-start"); exists(hold); {
		time.Sleep(20 * time.Millisecond)
	}
	old := rawMode()
	defer restore(old)
	// A TUI taking the terminal drops what was typed before it was ready,
	// as the real claude did with an Esc and a paste sent while it started.
	if n := pending(); n > 0 {
		appendLine("events.jsonl", fmt.Sprintf("dropped %d bytes typed while starting", n))
	}
	unix.IoctlSetInt(0, unix.TCFLSH, unix.TCIFLUSH)
	os.Stdout.WriteString("\x1b[?2004h") // bracketed paste on, as both CLIs do
	submit(prompt)
	readLoop()
}

// authStatus answers as the real CLIs do: signed in unless
// $HOME/.standin/signed-out exists.
func authStatus() {
	_, err := os.Stat(filepath.Join(stateDir, "signed-out"))
	out := err != nil
	switch {
	case cli == "codex" && out:
		fmt.Println("Logged in using ChatGPT")
	case cli == "codex":
		fmt.Println("Not logged in")
		os.Exit(1)
	case out:
		fmt.Println(`{"loggedIn": true, "authMethod": "claude.ai", "email": "standin@example.invalid"}`)
	default:
		fmt.Println(`{"loggedIn": false, "authMethod": "none"}`)
		os.Exit(1)
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// pending is how many bytes wait unread on the terminal.
func pending() int {
	n, _ := unix.IoctlGetInt(0, unix.TIOCINQ)
	return n
}

func fatal(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "standin: "+format+"\n", a...)
	os.Exit(1)
}

func record(name string, v any) {
	data, _ := json.Marshal(v)
	os.WriteFile(filepath.Join(stateDir, cli+"-"+name), data, 0o600)
}

func appendLine(name string, v any) {
	f, err := os.OpenFile(filepath.Join(stateDir, cli+"-"+name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	data, _ := json.Marshal(v)
	f.Write(append(data, '\n'))
	f.Close()
}

func rawMode() *unix.Termios {
	t, err := unix.IoctlGetTermios(0, unix.TCGETS)
	if err != nil {
		return nil
	}
	old := *t
	t.Lflag &^= unix.ECHO | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Iflag &^= unix.ICRNL | unix.IXON
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	unix.IoctlSetTermios(0, unix.TCSETS, t)
	return &old
}

func restore(t *unix.Termios) {
	if t != nil {
		unix.IoctlSetTermios(0, unix.TCSETS, t)
	}
}

// readLoop splits the input into messages: what is between the paste
// markers is content (its newlines included); a CR or LF outside a paste
// submits; a lone ESC is an interrupt.
func readLoop() {
	var msg []byte
	var in []byte
	pasting := false
	buf := make([]byte, 4096)
	for {
		n, err := os.Stdin.Read(buf)
		if err != nil {
			return
		}
		in = append(in, buf[:n]...)
		for len(in) > 0 {
			switch {
			case strings.HasPrefix(string(in), "\x1b[200~"):
				pasting, in = true, in[6:]
			case strings.HasPrefix(string(in), "\x1b[201~"):
				pasting, in = false, in[6:]
			case in[0] == 0x1b && len(in) < 6 && strings.HasPrefix("\x1b[20", string(in[:min(len(in), 4)])):
				goto more // a marker split across reads
			case in[0] == 0x1b:
				appendLine("events.jsonl", "interrupt")
				in = in[1:]
			case (in[0] == '\r' || in[0] == '\n') && !pasting:
				in = in[1:]
				if len(msg) > 0 {
					submit(string(msg))
					msg = nil
				}
			default:
				c := in[0]
				if c == '\r' {
					c = '\n' // tmux turns a pasted LF into CR
				}
				msg, in = append(msg, c), in[1:]
			}
		}
	more:
	}
}

// submit is one turn: the prompt hook, the directives, the turn-end hook.
func submit(m string) {
	turns++
	appendLine("messages.jsonl", m)
	switch strings.TrimSpace(m) {
	case "/exit", "/quit":
		if cli == "claude" {
			hook("SessionEnd", map[string]any{"reason": "prompt_input_exit"})
		}
		restore(nil)
		os.Exit(0)
	}
	// The real CLI's project directory: every character of the working
	// directory but [A-Za-z0-9] as '-'.
	transcript := filepath.Join(home, ".claude/projects", regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(mustGetwd(), "-"), session+".jsonl")
	if cli == "codex" {
		transcript = filepath.Join(home, ".codex/sessions", session+".jsonl")
	}
	os.MkdirAll(filepath.Dir(transcript), 0o700)
	appendFile(transcript, m)
	hook("UserPromptSubmit", map[string]any{"prompt": m, "transcript_path": transcript})
	backed := false // one back per message, by instruction or directive
	for _, line := range strings.Split(m, "\n") {
		d, ok := strings.CutPrefix(strings.TrimSpace(line), "standin: ")
		if strings.HasPrefix(strings.TrimSpace(line), "BACK: ") {
			d, ok = "back", true // the box packer's BACK instruction, as a real CLI follows it
		}
		if !ok || d == "back" && backed {
			continue
		}
		backed = backed || d == "back"
		directive(d)
	}
	hook("Stop", map[string]any{"stop_hook_active": false, "transcript_path": transcript})
}

func mustGetwd() string { d, _ := os.Getwd(); return d }

func appendFile(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err == nil {
		fmt.Fprintln(f, line)
		f.Close()
	}
}

const handover = `# Hand-over: standin %s
## Goal and definition of done
none
## User preferences and constraints
none
## Current state
turn %d
## Decisions made
none
## Files touched
work.txt
## Next steps
none
## Commands
none
## Environment facts
none
## Gotchas learned
none
## Open questions
none
`

func directive(d string) {
	switch {
	case d == "commit":
		appendFile("work.txt", fmt.Sprintf("turn %d", turns))
		run("", "git", "add", "work.txt")
		run("", "git", "-c", "user.name=standin", "-c", "user.email=standin@invalid", "commit", "-q", "-m", fmt.Sprintf("standin turn %d", turns))
	case d == "progress", d == "back":
		run(fmt.Sprintf(handover, d, turns), "cocoonbox-agent", "offload", "post", "--"+d)
	case d == "question":
		run("Which colour should the button be?", "cocoonbox-agent", "offload", "post", "--question")
	case d == "hold":
		appendLine("events.jsonl", "holding")
		for {
			if _, err := os.Stat(filepath.Join(stateDir, "release")); err == nil {
				os.Remove(filepath.Join(stateDir, "release"))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	case d == "die":
		os.Exit(3)
	}
}

func run(stdin, name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	appendLine("runs.jsonl", map[string]any{"cmd": append([]string{name}, args...), "out": string(out), "err": fmt.Sprint(err)})
}

// hook calls our hooks file's command for the event (claude), or codex's
// notify program for a finished turn.
func hook(event string, fields map[string]any) {
	payload := map[string]any{"session_id": session, "cwd": mustGetwd(), "hook_event_name": event}
	for k, v := range fields {
		payload[k] = v
	}
	if cli == "codex" {
		if event != "Stop" || len(notify) == 0 {
			return
		}
		data, _ := json.Marshal(map[string]any{"type": "agent-turn-complete", "turn-id": fmt.Sprint(turns), "cwd": mustGetwd()})
		cmd := exec.Command(notify[0], append(notify[1:], string(data))...)
		cmd.Run()
		return
	}
	var s struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if _, err := os.Stat(filepath.Join(stateDir, "no-hooks")); err == nil {
		return // as under a managed allowManagedHooksOnly: our hooks never run
	}
	data, err := os.ReadFile(settings)
	if err != nil || json.Unmarshal(data, &s) != nil {
		return
	}
	body, _ := json.Marshal(payload)
	for _, m := range s.Hooks[event] {
		for _, h := range m.Hooks {
			cmd := exec.Command("sh", "-c", h.Command)
			cmd.Stdin = strings.NewReader(string(body))
			cmd.Run()
		}
	}
}
