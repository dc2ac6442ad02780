package desktop

import (
	"bufio"
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Session is what a save of xfce4-session holds for one session: the XSMP
// clients it restarts, in the order of their numbers.
type Session struct {
	// Name is the session's name ("Default").
	Name    string
	Clients []Client
}

// Client is one saved XSMP client (ClientN_* keys).
type Client struct {
	// Program is the client's program name ("xfce4-terminal").
	Program string
	// RestartCommand is the command xfce4-session runs to restart it.
	RestartCommand []string
	// Hostname is where the client ran ("local/<host>").
	Hostname string
	// CurrentDirectory is the client's working directory, when it said.
	CurrentDirectory string
}

// ParseSession reads an xfce4-session save (a key file: "[Session: NAME]"
// groups of "ClientN_Key=value" lines) and returns its first session. It
// refuses data without a session group, and lines that are neither a
// group, a key=value pair, a comment nor blank, naming the line.
func ParseSession(data []byte) (Session, error) {
	var s Session
	found := false
	inSession := false
	clients := map[int]*Client{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		if text[0] == '[' {
			if !strings.HasSuffix(text, "]") {
				return Session{}, fmt.Errorf("session file line %d: group header %q lacks its closing ']'", line, text)
			}
			group := text[1 : len(text)-1]
			name, ok := strings.CutPrefix(group, "Session: ")
			// Only the first session group counts; later ones are other sessions.
			inSession = ok && !found
			if inSession {
				s.Name, found = name, true
			}
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		if !ok {
			return Session{}, fmt.Errorf("session file line %d: %q is not a key=value line", line, text)
		}
		if !inSession {
			continue
		}
		num, field, ok := clientKey(key)
		if !ok {
			continue
		}
		c := clients[num]
		if c == nil {
			c = &Client{}
			clients[num] = c
		}
		switch field {
		case "Program":
			c.Program = value
		case "RestartCommand":
			c.RestartCommand = splitList(value)
		case "Hostname":
			c.Hostname = value
		case "CurrentDirectory":
			c.CurrentDirectory = value
		}
	}
	if err := sc.Err(); err != nil {
		return Session{}, fmt.Errorf("session file: %w", err)
	}
	if !found {
		return Session{}, fmt.Errorf("not an xfce4-session save: no [Session: NAME] group")
	}
	nums := make([]int, 0, len(clients))
	for n := range clients {
		nums = append(nums, n)
	}
	sort.Ints(nums)
	for _, n := range nums {
		s.Clients = append(s.Clients, *clients[n])
	}
	return s, nil
}

// clientKey splits "Client12_Program" into 12 and "Program".
func clientKey(key string) (int, string, bool) {
	rest, ok := strings.CutPrefix(key, "Client")
	if !ok {
		return 0, "", false
	}
	numText, field, ok := strings.Cut(rest, "_")
	if !ok || field == "" {
		return 0, "", false
	}
	n, err := strconv.Atoi(numText)
	if err != nil || n < 0 {
		return 0, "", false
	}
	return n, field, true
}

// splitList splits a GKeyFile-style list ("a,b\,c") at unescaped commas.
func splitList(v string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(v); i++ {
		switch {
		case v[i] == '\\' && i+1 < len(v):
			i++
			cur.WriteByte(v[i])
		case v[i] == ',':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(v[i])
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// Programs lists the saved clients' program names.
func (s Session) Programs() []string {
	out := make([]string, 0, len(s.Clients))
	for _, c := range s.Clients {
		out = append(out, c.Program)
	}
	return out
}
