package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/spf13/cobra"

	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/guest/cli"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// screenViewers are the VNC viewers --open tries, in order: TigerVNC's
// (Debian's tigervnc-viewer, the design card's native client), then any
// other that takes HOST::PORT.
var screenViewers = []string{"vncviewer", "xtigervncviewer", "remmina"}

// screenChunk is the most bytes of a viewer one data message of
// Session.Screen carries (session.proto allows 256 KiB; a viewer sends
// small messages: keys, pointer moves, update requests).
const screenChunk = 32 << 10

// screen serves the box's screen as a VNC endpoint on 127.0.0.1:PORT
// until interrupted: each connection a viewer makes is one Session.Screen
// of its own, the RFB bytes passed through, so any VNC client works, as
// rsh lets any ssh client work. The box's state is checked first
// (Boxes.Status), so a box that is not the user's or not running fails at
// once with rsh's exit codes. The check opens no screen: before the desk
// image raised TigerVNC's BlacklistThreshold, the box's VNC refused every
// client of its loopback for a while after five connections that ended
// before their handshake (docs/screen.md).
func screen(fs *command.Flags) runner {
	port := fs.Int("port", 0, "the local `PORT` of the VNC endpoint (default: any free one, printed)")
	open := fs.Bool("open", false, "start vncviewer (Debian tigervnc-viewer) on it")
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		if *port < 0 || *port > 65535 {
			return command.UsageError{Msg: fmt.Sprintf("screen: --port %d: a TCP port is 1 to 65535 (0 or none: any free one)", *port)}
		}
		box := optional(pos)
		if box != "" && !client.BoxName.MatchString(box) {
			return command.UsageError{Msg: fmt.Sprintf("screen: NAME %q %s", shorten(box), client.BoxNameRule)}
		}
		token, err := st.token()
		if err != nil {
			return exitError{cli.Failed, "screen: " + err.Error()}
		}
		if err := checkRunning(ctx, st, box); err != nil {
			return err
		}
		client := controlv1connect.NewSessionClient(streamClient(st.endpoint, 15*time.Second), st.endpoint,
			connect.WithGRPC(), connect.WithInterceptors(client.BearerInterceptor(token)))
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
		if err != nil {
			return exitError{cli.Failed, "screen: " + err.Error()}
		}
		defer ln.Close()
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
		addr := ln.Addr().(*net.TCPAddr)
		name := box
		if name == "" {
			name = "your first box"
		}
		fmt.Fprintf(stdout, "The screen of %s is a VNC endpoint on 127.0.0.1:%d (any VNC client: vncviewer 127.0.0.1::%d). Ctrl-C ends it.\n", name, addr.Port, addr.Port)
		if *open {
			startViewer(addr.Port, stdout)
		}
		for {
			c, err := ln.Accept()
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return exitError{cli.IO, "screen: " + err.Error()}
			}
			go func() {
				if err := relayScreen(ctx, client, box, c); err != nil {
					fmt.Fprintln(os.Stderr, st.explainStream("screen", err))
				}
			}()
		}
	}
}

// checkRunning answers nil when box (a name, an id, or "" for the first)
// is the user's and running, else the CLI's error with rsh's exit code.
func checkRunning(ctx context.Context, st *state, box string) error {
	bc, err := st.boxes()
	if err != nil {
		return err
	}
	resp, err := bc.Status(ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: box}))
	if err != nil {
		return st.explainBox(describe("screen", box), err)
	}
	b := resp.Msg.GetBox()
	if b == nil {
		return exitError{cli.NoInput, "screen: you have no box yet: cocoonbox box create NAME makes one"}
	}
	if b.GetState() != controlv1.BoxState_BOX_STATE_RUNNING {
		return exitError{cli.Unavailable, fmt.Sprintf("screen: box %s is %s: wake it first (cocoonbox box ensure %s)", b.GetName(), stateName(b.GetState()), b.GetName())}
	}
	return nil
}

// startViewer starts the first VNC viewer installed on 127.0.0.1::port,
// or says none is.
func startViewer(port int, stdout io.Writer) {
	for _, v := range screenViewers {
		path, err := exec.LookPath(v)
		if err != nil {
			continue
		}
		target := fmt.Sprintf("127.0.0.1::%d", port)
		if v == "remmina" {
			target = fmt.Sprintf("vnc://127.0.0.1:%d", port)
		}
		cmd := exec.Command(path, target)
		if err := cmd.Start(); err == nil {
			go cmd.Wait()
			return
		}
	}
	fmt.Fprintf(stdout, "--open: no VNC viewer is installed (%v; Debian: apt install tigervnc-viewer)\n", screenViewers)
}

// openedScreen is a Session.Screen past connected.
type openedScreen struct {
	s      *connect.BidiStreamForClient[controlv1.SessionScreenRequest, controlv1.SessionScreenResponse]
	cancel context.CancelFunc
}

// openScreen opens a Session.Screen on box and waits for connected.
func openScreen(ctx context.Context, client controlv1connect.SessionClient, box string) (openedScreen, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := client.Screen(ctx)
	if err := s.Send(&controlv1.SessionScreenRequest{Msg: &controlv1.SessionScreenRequest_Start{Start: &controlv1.SessionScreenStart{Box: box}}}); err != nil && !errors.Is(err, io.EOF) {
		cancel()
		return openedScreen{}, err
	}
	first, err := s.Receive()
	if err != nil {
		cancel()
		return openedScreen{}, err
	}
	if !first.GetConnected() {
		cancel()
		return openedScreen{}, errors.New("the api's answer did not begin with connected")
	}
	return openedScreen{s: s, cancel: cancel}, nil
}

// relayScreen passes c's bytes through one Session.Screen until either
// side ends; c is closed when it returns. A screen that ended because the
// box's server closed, or the viewer went, is no error.
func relayScreen(ctx context.Context, client controlv1connect.SessionClient, box string, c net.Conn) error {
	defer c.Close()
	o, err := openScreen(ctx, client, box)
	if err != nil {
		return err
	}
	defer o.cancel()
	go func() {
		defer o.cancel()
		buf := make([]byte, screenChunk)
		for {
			n, err := c.Read(buf)
			if n > 0 && o.s.Send(&controlv1.SessionScreenRequest{Msg: &controlv1.SessionScreenRequest_Data{Data: buf[:n]}}) != nil {
				return
			}
			if err != nil {
				_ = o.s.CloseRequest()
				return
			}
		}
	}()
	for {
		m, err := o.s.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil || connect.CodeOf(err) == connect.CodeCanceled {
				return nil
			}
			return err
		}
		if _, err := c.Write(m.GetData()); err != nil {
			return nil
		}
	}
}

// screenArgs is screen's one optional NAME.
func screenArgs(_ *cobra.Command, args []string) error {
	if len(args) > 1 {
		return command.Usagef("screen: one box at a time (got %d names)", len(args))
	}
	return nil
}
