package vault

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
)

func newTestLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, nil))
}

// sprintAll is every way a value may be printed by mistake.
func sprintAll(vs ...any) string {
	s := ""
	for _, v := range vs {
		j, _ := json.Marshal(v)
		s += fmt.Sprint(v) + fmt.Sprintf("%v %+v %#v %s %q", v, v, v, v, v) + string(j)
	}
	return s
}
