package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"text/tabwriter"

	"connectrpc.com/connect"

	"github.com/cocoonbox/cocoonbox/api/client"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// apiStatusJSON is `cocoonbox status --json`: one object, on failure too.
type apiStatusJSON struct {
	Endpoint       string `json:"endpoint"`
	EndpointSource string `json:"endpoint_source"`
	// TokenSource is "$COCOONBOX_TOKEN", "cli.json" or "none".
	TokenSource string `json:"token_source"`
	// Device is the sign-in the token belongs to; nil for a token of no
	// device (the console's personal token) or when the api did not say.
	Device *deviceJSON `json:"device"`
	// Reachable is false when the api gave no answer (Error says why).
	Reachable bool `json:"reachable"`
	// APIVersion is the api's Version.GetVersion, "NAME RELEASE
	// (REVISION)"; "unknown" when it did not answer one (an api older
	// than the call).
	APIVersion string `json:"api_version"`
	// BoxSupervisor is false when the api answers without one (Boxes
	// answers UNAVAILABLE; SupervisorMessage is its words).
	BoxSupervisor     bool        `json:"box_supervisor"`
	SupervisorMessage string      `json:"supervisor_message,omitempty"`
	Images            []imageJSON `json:"images"`
	LatestImage       string      `json:"latest_image"`
	Boxes             []boxJSON   `json:"boxes"`
	Error             string      `json:"error,omitempty"`
}

// status is `cocoonbox status [--json]`: where the CLI points and what
// answers there, telling a dead api (exit 1) from an api without a box
// supervisor (exit 0, said so). It makes read-only calls only:
// Version.GetVersion (without the token: which api answers),
// Account.ListDevices (who the token is), Boxes.Images and Boxes.List.
func status(fs *command.Flags) runner {
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, pos []string, st *state, stdin io.Reader, stdout io.Writer) error {
		out := apiStatusJSON{Endpoint: st.endpoint, EndpointSource: st.source, TokenSource: "none",
			APIVersion: "unknown", Images: []imageJSON{}, Boxes: []boxJSON{}}
		if os.Getenv("COCOONBOX_TOKEN") != "" {
			out.TokenSource = "$COCOONBOX_TOKEN"
		} else if _, err := st.saved(); err == nil {
			out.TokenSource = "cli.json"
		}
		err := st.probe(ctx, &out)
		if err != nil {
			out.Error = err.Error()
		}
		if *asJSON {
			if perr := printJSON(stdout, out); perr != nil {
				return perr
			}
			if err != nil {
				return jsonPrinted{err}
			}
			return nil
		}
		printStatus(stdout, out)
		return err
	}
}

// probe fills out's answers from the api; an error is a failure of the
// status itself (no answer, or the token refused).
func (s *state) probe(ctx context.Context, out *apiStatusJSON) error {
	// Any answer, a refusal too, tells reachable from not; an api older
	// than Version answers HTTP 404, which connect reads as UNIMPLEMENTED
	// (not a wire error, yet an answer).
	v, err := controlv1connect.NewVersionClient(http.DefaultClient, s.endpoint).GetVersion(ctx, connect.NewRequest(&controlv1.GetVersionRequest{}))
	if client.Unanswered(err) && connect.CodeOf(err) != connect.CodeUnimplemented {
		return s.why(err)
	}
	out.Reachable = true
	if err == nil && v.Msg.Version != "" {
		out.APIVersion = v.Msg.Version
	}
	if out.TokenSource == "none" {
		return fmt.Errorf("not signed in to %s: run cocoonbox login --endpoint %s", s.endpoint, s.endpoint)
	}
	account, err := s.account()
	if err != nil {
		return err
	}
	devs, err := account.ListDevices(ctx, connect.NewRequest(&controlv1.ListDevicesRequest{}))
	if err != nil {
		if client.Unanswered(err) {
			out.Reachable = false
			return s.why(err)
		}
		return s.explain("status", err)
	}
	for _, d := range devs.Msg.Devices {
		if d.Current {
			out.Device = &deviceJSON{ID: d.Id, Client: d.Client, Label: d.Label}
		}
	}
	boxes, err := s.boxes()
	if err != nil {
		return err
	}
	images, err := boxes.Images(ctx, connect.NewRequest(&controlv1.ImagesRequest{}))
	var ce *connect.Error
	switch {
	case err == nil:
		out.BoxSupervisor = true
		out.LatestImage = images.Msg.Latest
		for _, im := range images.Msg.Images {
			out.Images = append(out.Images, imageJSON{Ref: im.Ref, Version: im.Version, Tier: im.Tier})
		}
	case connect.CodeOf(err) == connect.CodeUnavailable && !client.Unanswered(err) && errors.As(err, &ce):
		out.SupervisorMessage = ce.Message()
		return nil
	default:
		return s.explainBox("list images", err)
	}
	list, err := boxes.List(ctx, connect.NewRequest(&controlv1.ListBoxesRequest{}))
	if err != nil {
		return s.explainBox("list boxes", err)
	}
	for _, b := range list.Msg.Boxes {
		out.Boxes = append(out.Boxes, boxToJSON(b))
	}
	return nil
}

func printStatus(w io.Writer, out apiStatusJSON) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "endpoint\t%s (from %s)\n", out.Endpoint, out.EndpointSource)
	who := "no token: cocoonbox login signs in"
	switch {
	case out.TokenSource != "none" && out.Device != nil:
		who = fmt.Sprintf("from %s, device %s (%s, %s)", out.TokenSource, out.Device.ID, out.Device.Label, out.Device.Client)
	case out.TokenSource != "none" && out.Reachable && out.Error == "":
		who = fmt.Sprintf("from %s, a token of no device (the console's personal token)", out.TokenSource)
	case out.TokenSource != "none":
		who = "from " + out.TokenSource
	}
	fmt.Fprintf(tw, "token\t%s\n", who)
	if !out.Reachable {
		fmt.Fprintf(tw, "api\tnot reachable\n")
		return
	}
	fmt.Fprintf(tw, "api\tanswering, version %s\n", out.APIVersion)
	switch {
	case out.Error != "":
		return
	case !out.BoxSupervisor:
		fmt.Fprintf(tw, "boxes\tnone: the api answers without a box supervisor (its words: %s)\n", out.SupervisorMessage)
		return
	}
	fmt.Fprintf(tw, "images\t")
	for i, im := range out.Images {
		sep := ", "
		if i == 0 {
			sep = ""
		}
		mark := ""
		if im.Ref == out.LatestImage {
			mark = " (latest)"
		}
		fmt.Fprintf(tw, "%s%s%s", sep, im.Ref, mark)
	}
	fmt.Fprintln(tw)
	if len(out.Boxes) == 0 {
		fmt.Fprintf(tw, "boxes\tnone yet: cocoonbox box create NAME makes one\n")
	}
	for _, b := range out.Boxes {
		fmt.Fprintf(tw, "box\t%s %s %s %s\n", b.Name, b.BoxID, b.State, b.Image)
	}
}
