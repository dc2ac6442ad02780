package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"

	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1/controlv1connect"
	"github.com/cocoonbox/cocoonbox/internal/command"
)

// The read-only box commands: boxes, images, box status. Contract: Boxes
// (api) ↔ sandboxd; the JSON shapes follow the Control MCP's box_list and
// box_status (enum values lower-case without their prefix).

// boxJSON is one box as boxes --json and box status --json print it.
type boxJSON struct {
	BoxID         string    `json:"box_id"`
	Name          string    `json:"name"`
	State         string    `json:"state"`
	Image         string    `json:"image"`
	LastSavedAtMs int64     `json:"last_saved_at_ms"`
	CreatedAt     time.Time `json:"created_at"`
	Incarnation   int64     `json:"incarnation"`
	Host          string    `json:"host"`
}

func boxToJSON(b *controlv1.Box) boxJSON {
	return boxJSON{BoxID: b.BoxId, Name: b.Name, State: stateName(b.State), Image: b.Image,
		LastSavedAtMs: b.LastSavedAtMs, CreatedAt: b.CreatedAt.AsTime(), Incarnation: b.Incarnation, Host: b.Host}
}

// stateName is a BoxState as the contract writes it: "running".
func stateName(s controlv1.BoxState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "BOX_STATE_"))
}

// phaseName is a Phase as the contract writes it: "restoring_files".
func phaseName(p controlv1.Phase) string {
	return strings.ToLower(strings.TrimPrefix(p.String(), "PHASE_"))
}

// listBoxes is `cocoonbox boxes [--json]`: the caller's boxes, oldest first.
func listBoxes(fs *command.Flags) runner {
	return reading(fs, func(ctx context.Context, pos []string, asJSON bool, st *state, client controlv1connect.BoxesClient, stdout io.Writer) error {
		resp, err := client.List(ctx, connect.NewRequest(&controlv1.ListBoxesRequest{}))
		if err != nil {
			return st.explainBox("list boxes", err)
		}
		if asJSON {
			out := []boxJSON{}
			for _, b := range resp.Msg.Boxes {
				out = append(out, boxToJSON(b))
			}
			return printJSON(stdout, out)
		}
		if len(resp.Msg.Boxes) == 0 {
			fmt.Fprintln(stdout, "No boxes yet: cocoonbox box create NAME makes one.")
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tID\tSTATE\tIMAGE\tLAST SAVED")
		for _, b := range resp.Msg.Boxes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", b.Name, b.BoxId, stateName(b.State), b.Image, savedAt(b.LastSavedAtMs))
		}
		return tw.Flush()
	})
}

func savedAt(ms int64) string {
	if ms == 0 {
		return "never"
	}
	return time.UnixMilli(ms).Local().Format(time.DateTime)
}

// statusJSON is box status --json: box_status's fields, and the operation
// under way (absent when none is).
type statusJSON struct {
	boxJSON
	LatestImage      string     `json:"latest_image"`
	UpgradeAvailable bool       `json:"upgrade_available"`
	Operation        *eventJSON `json:"operation,omitempty"`
}

// boxStatus is `cocoonbox box status [NAME] [--json]`.
func boxStatus(fs *command.Flags) runner {
	return reading(fs, func(ctx context.Context, pos []string, asJSON bool, st *state, client controlv1connect.BoxesClient, stdout io.Writer) error {
		name := optional(pos)
		if err := checkBoxArgs("status", name, ""); err != nil {
			return err
		}
		resp, err := client.Status(ctx, connect.NewRequest(&controlv1.BoxStatusRequest{Box: name}))
		if err != nil {
			return st.explainBox(describe("box status", name), err)
		}
		m := resp.Msg
		out := statusJSON{boxJSON: boxJSON{State: stateName(controlv1.BoxState_BOX_STATE_ABSENT)},
			LatestImage: m.LatestImage, UpgradeAvailable: m.UpgradeAvailable}
		if m.Box != nil {
			out.boxJSON = boxToJSON(m.Box)
		}
		if m.Operation != nil {
			ev := operationJSON(m.Operation)
			out.Operation = &ev
		}
		if asJSON {
			return printJSON(stdout, out)
		}
		if m.Box == nil {
			fmt.Fprintf(stdout, "No box yet (state absent): cocoonbox box create NAME makes one; the latest image is %s.\n", m.LatestImage)
			return nil
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "box\t%s (%s)\n", out.Name, out.BoxID)
		fmt.Fprintf(tw, "state\t%s\n", out.State)
		upgrade := "up to date"
		if out.UpgradeAvailable {
			upgrade = "upgrade available: cocoonbox box upgrade " + out.Name + " --confirm"
		}
		fmt.Fprintf(tw, "image\t%s (latest %s: %s)\n", out.Image, out.LatestImage, upgrade)
		fmt.Fprintf(tw, "last saved\t%s\n", savedAt(out.LastSavedAtMs))
		fmt.Fprintf(tw, "incarnation\t%d, on host %s\n", out.Incarnation, out.Host)
		if m.Operation != nil {
			fmt.Fprintf(tw, "operation\t%s %s, phase %s\n", m.Operation.OperationId, m.Operation.Kind, phaseName(m.Operation.Phase))
		}
		return tw.Flush()
	})
}

// imagesJSON is images --json.
type imagesJSON struct {
	Images []imageJSON `json:"images"`
	Latest string      `json:"latest"`
}

type imageJSON struct {
	Ref     string `json:"ref"`
	Version int32  `json:"version"`
	Tier    string `json:"tier"`
}

// listImages is `cocoonbox images [--json]`: what the api can boot, oldest
// first, the latest marked.
func listImages(fs *command.Flags) runner {
	return reading(fs, func(ctx context.Context, pos []string, asJSON bool, st *state, client controlv1connect.BoxesClient, stdout io.Writer) error {
		resp, err := client.Images(ctx, connect.NewRequest(&controlv1.ImagesRequest{}))
		if err != nil {
			return st.explainBox("list images", err)
		}
		if asJSON {
			out := imagesJSON{Images: []imageJSON{}, Latest: resp.Msg.Latest}
			for _, im := range resp.Msg.Images {
				out.Images = append(out.Images, imageJSON{Ref: im.Ref, Version: im.Version, Tier: im.Tier})
			}
			return printJSON(stdout, out)
		}
		for _, im := range resp.Msg.Images {
			mark := " "
			if im.Ref == resp.Msg.Latest {
				mark = "*"
			}
			fmt.Fprintf(stdout, "%s %s\n", mark, im.Ref)
		}
		fmt.Fprintln(stdout, "(* the latest: box create boots it, box upgrade moves a box onto it)")
		return nil
	})
}

// reading is a read-only Boxes command's runner: its --json, then body
// with the endpoint's Boxes client.
func reading(fs *command.Flags, body func(ctx context.Context, pos []string, asJSON bool, st *state, client controlv1connect.BoxesClient, stdout io.Writer) error) runner {
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context, pos []string, st *state, _ io.Reader, stdout io.Writer) error {
		client, err := st.boxes()
		if err != nil {
			return err
		}
		return body(ctx, pos, *asJSON, st, client, stdout)
	}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// optional is the one optional NAME argument ("" without it: the caller's
// first box).
func optional(pos []string) string {
	if len(pos) == 0 {
		return ""
	}
	return pos[0]
}

// describe names a command and its box for an error: `box save "demo"`,
// or `box save (your first box)`.
func describe(cmd, name string) string {
	if name == "" {
		return cmd + " (your first box)"
	}
	return fmt.Sprintf("%s %q", cmd, name)
}
