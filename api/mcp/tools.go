package mcp

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools' names, descriptions and schemas, written here once: tools/list
// answers exactly these (a test holds the api and docs/control-mcp.md to
// them).
//
// Contract: Control MCP (box lifecycle for native agents, M4.7), the tool
// table and "Tool descriptions (model-facing; the api returns these
// exactly)", whose text was lost from the contract and is written here.

// boxArg is the optional box argument, as the contract words it.
const boxArg = `"box":{"type":"string","description":"The box's name or id; without it, your first box."}`

// waitArg is the wait argument of box_ensure and box_create.
const waitArg = `"wait":{"type":"boolean","default":true,"description":"Answer when the operation is done (true, the default) or at once with its operation_id (false)."}`

// confirmArg is the confirm argument of box_upgrade and box_delete.
const confirmArg = `"confirm":{"type":"boolean","description":"true once the user has confirmed this change; anything else refuses it."}`

// spec is one tool as published: name, description, its annotations (a
// client's hints: read-only, destructive, idempotent; never the world
// beyond the caller's boxes), input and output schema (JSON Schema 2020-12
// objects, no extra properties).
type spec struct {
	name, description string
	annotations       *sdk.ToolAnnotations
	input, output     string
}

// readOnly, additive and destructive are the three kinds of tool: one that
// only reads; one that changes the caller's boxes but loses nothing; one
// that ends programs or replaces or removes state. Idempotent: a second
// call with the same arguments changes nothing more (it is refused, or
// finds the box as the first left it).
func readOnly(title string) *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{Title: title, ReadOnlyHint: true, OpenWorldHint: new(false)}
}

func additive(title string, idempotent bool) *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{Title: title, DestructiveHint: new(false), IdempotentHint: idempotent, OpenWorldHint: new(false)}
}

func destructive(title string, idempotent bool) *sdk.ToolAnnotations {
	return &sdk.ToolAnnotations{Title: title, DestructiveHint: new(true), IdempotentHint: idempotent, OpenWorldHint: new(false)}
}

var specs = []spec{
	{
		name:        "box_list",
		annotations: readOnly("List boxes"),
		description: "List your cocoonbox boxes, oldest first, with each box's id, name, state, image and last save time. It only reads and answers at once.",
		input:       `{"type":"object","properties":{},"additionalProperties":false}`,
		output: `{"type":"object","properties":{"boxes":{"type":"array","items":` + object(
			"box_id", "string", "name", "string", "state", "string", "image", "string", "last_saved_at_ms", "integer") + `}},"required":["boxes"],"additionalProperties":false}`,
	},
	{
		name:        "box_status",
		annotations: readOnly("Box status"),
		description: "Show a box's state, its image, the latest image and whether an upgrade to it is available; with no box at all the state is \"absent\". It only reads and answers at once.",
		input:       `{"type":"object","properties":{` + boxArg + `},"additionalProperties":false}`,
		output: object("box_id", "string", "name", "string", "state", "string", "image", "string",
			"latest_image", "string", "upgrade_available", "boolean", "last_saved_at_ms", "integer"),
	},
	{
		name:        "box_ensure",
		annotations: additive("Ensure a box runs", true),
		description: "Make a box running: wake it when hibernated, boot it when stopped or failed, or create your first box when you have none. With wait (the default) it answers once the box runs; it needs no confirmation.",
		input:       `{"type":"object","properties":{` + boxArg + `,` + waitArg + `},"additionalProperties":false}`,
		output:      object("box_id", "string", "state", "string", "operation_id", "string"),
	},
	{
		name:        "box_create",
		annotations: additive("Create a box", false),
		description: "Create a new box called name, on image (default: the latest), and boot it. With wait (the default) it answers once the box runs; it needs no confirmation.",
		input: `{"type":"object","properties":{"name":{"type":"string","description":"The new box's name: 1 to 63 of a-z, 0-9 and -, starting with a letter."},` +
			`"image":{"type":"string","description":"The image to boot, such as cbdesk:v22-base; without it, the latest."},` + waitArg + `},"required":["name"],"additionalProperties":false}`,
		output: object("box_id", "string", "name", "string", "state", "string", "operation_id", "string"),
	},
	{
		name:        "box_hibernate",
		annotations: additive("Hibernate a box", true),
		description: "Hibernate a running box: its memory and disk are kept and its programs pause until it is woken (box_ensure). It answers once the box is hibernated; it needs no confirmation.",
		input:       `{"type":"object","properties":{` + boxArg + `},"additionalProperties":false}`,
		output:      object("box_id", "string", "state", "string", "operation_id", "string"),
	},
	{
		name:        "box_save",
		annotations: destructive("Save a box", false),
		description: "Save a box's disk state, replacing its previous save; a running box keeps running and a hibernated one stays hibernated. It answers once the save is done, with its size in bytes; it needs no confirmation.",
		input:       `{"type":"object","properties":{` + boxArg + `},"additionalProperties":false}`,
		output:      object("box_id", "string", "last_saved_at_ms", "integer", "operation_id", "string", "bytes", "integer"),
	},
	{
		name:        "box_upgrade",
		annotations: destructive("Upgrade a box", true),
		description: "Move a box onto the latest image, keeping /home/user and /workspace; the box restarts, so the programs running in it end. Ask the user first and pass confirm: true; it answers once the upgrade is done.",
		input:       `{"type":"object","properties":{` + boxArg + `,` + confirmArg + `},"required":["confirm"],"additionalProperties":false}`,
		output:      object("box_id", "string", "state", "string", "image", "string", "operation_id", "string"),
	},
	{
		name:        "box_delete",
		annotations: destructive("Delete a box", true),
		description: "Delete a box for good, keeping only its newest save. Ask the user first, name the box, and pass confirm: true; it answers once the box is gone.",
		input:       `{"type":"object","properties":{` + boxArg + `,` + confirmArg + `},"required":["box","confirm"],"additionalProperties":false}`,
		output:      object("box_id", "string", "operation_id", "string"),
	},
	{
		name:        "usage",
		annotations: readOnly("Model usage"),
		description: "Show your model usage in micro-dollars, today and this month, your daily cap, whether it is the default cap, and what remains of it today. It only reads and answers at once.",
		input:       `{"type":"object","properties":{},"additionalProperties":false}`,
		output: object("today", "integer", "month", "integer", "daily_cap_micros", "integer",
			"default_cap", "boolean", "remaining_today_micros", "integer"),
	},
	{
		name:        "box_schedule_set",
		annotations: additive("Schedule a box's wake", false),
		description: "Schedule a box to wake: once at at (an RFC 3339 time) or on cron (five fields: minute hour day month weekday, read in time_zone, an IANA zone; default UTC), and keep it up keep_up_seconds after each wake. It answers at once; it needs no confirmation.",
		input: `{"type":"object","properties":{` + boxArg + `,"at":{"type":"string","description":"A one-time wake, RFC 3339."},` +
			`"cron":{"type":"string","description":"A cron expression of five fields."},"time_zone":{"type":"string","description":"The IANA time zone of cron; default UTC."},` +
			`"keep_up_seconds":{"type":"integer","minimum":0,"maximum":604800,"description":"How long the box stays up after each wake."}},"additionalProperties":false}`,
		output: object("schedule_id", "integer", "box_id", "string", "next_at_ms", "integer"),
	},
	{
		name:        "box_schedule_list",
		annotations: readOnly("List a box's wakes"),
		description: "List a box's scheduled wakes with their next wake and the time until which each keeps the box up. It only reads and answers at once.",
		input:       `{"type":"object","properties":{` + boxArg + `},"additionalProperties":false}`,
		output: `{"type":"object","properties":{"schedules":{"type":"array","items":` + object("schedule_id", "integer", "box_id", "string",
			"at_ms", "integer", "cron", "string", "time_zone", "string", "keep_up_seconds", "integer", "next_at_ms", "integer", "sleep_at_ms", "integer") +
			`}},"required":["schedules"],"additionalProperties":false}`,
	},
	{
		name:        "box_schedule_clear",
		annotations: destructive("Clear a box's wakes", true),
		description: "Remove a box's scheduled wakes: the one schedule_id names, or all of them without it. It answers at once; it needs no confirmation.",
		input:       `{"type":"object","properties":{` + boxArg + `,"schedule_id":{"type":"integer","minimum":1}},"additionalProperties":false}`,
		output:      object("box_id", "string", "cleared", "integer"),
	},
}

// object is the schema of an object holding exactly the given fields
// (name, type pairs), all required.
func object(fields ...string) string {
	props := map[string]map[string]string{}
	var names []string
	for i := 0; i < len(fields); i += 2 {
		props[fields[i]] = map[string]string{"type": fields[i+1]}
		names = append(names, fields[i])
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": names, "additionalProperties": false})
	return string(b)
}

// schemas are a spec parsed: the published input and output schemas, and
// the resolved input schema arguments are checked against. That one leaves
// confirm out of required: a call without it is the tool's refusal
// (isError: ask the user), not a protocol error, as false is.
type schemas struct {
	input, output *jsonschema.Schema
	check         *jsonschema.Resolved
}

func (s spec) parse() (schemas, error) {
	var out schemas
	for _, p := range []struct {
		text string
		into **jsonschema.Schema
	}{{s.input, &out.input}, {s.output, &out.output}} {
		if err := json.Unmarshal([]byte(p.text), p.into); err != nil {
			return out, fmt.Errorf("tool %s: schema: %w", s.name, err)
		}
	}
	check := out.input.CloneSchemas()
	check.Required = slices.DeleteFunc(slices.Clone(check.Required), func(n string) bool { return n == "confirm" })
	var err error
	if out.check, err = check.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true}); err != nil {
		return out, fmt.Errorf("tool %s: input schema: %w", s.name, err)
	}
	return out, nil
}
