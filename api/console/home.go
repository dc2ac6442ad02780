package console

import (
	"context"
	"net/http"
	"time"

	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/users"
)

// BoxSummary is one of the user's boxes as the home page and the Boxes
// page (package boxpage) show it.
type BoxSummary struct {
	Name  string `json:"name"`
	State string `json:"state"` // boxes' state: running, hibernated, ...
	Image string `json:"image"`
	// SavedAt is the newest save's time (null for none).
	SavedAt *time.Time `json:"saved_at"`
	// Operation is the kind of the operation under way ("" for none):
	// save, hibernate, ...
	Operation string `json:"operation,omitempty"`
	// Agent: an agent's grant made the box.
	Agent bool `json:"agent"`
	// Upgrade is the newer image of the box's tier the Boxes service
	// would upgrade it to ("" when it runs the latest, or its host did
	// not answer): the Boxes page's upgrade notice.
	Upgrade string `json:"upgrade,omitempty"`
}

// BoxLister answers a user's boxes, oldest first (api/apiserver's, over
// package boxes).
type BoxLister func(ctx context.Context, userID string) ([]BoxSummary, error)

// SetBoxes makes the home page list the user's boxes by list; without it
// the page says boxes are not available.
func (c *Console) SetBoxes(list BoxLister) { c.boxes = list }

// listBoxes is GET /cb/api/boxes: 200 {available, boxes: [BoxSummary]}.
func (c *Console) listBoxes(w http.ResponseWriter, r *http.Request, u users.User) {
	out := struct {
		Available bool         `json:"available"`
		Boxes     []BoxSummary `json:"boxes"`
	}{Available: c.boxes != nil, Boxes: []BoxSummary{}}
	if c.boxes != nil {
		bs, err := c.boxes(r.Context(), u.ID)
		if err != nil {
			c.fail(w, r, "read your boxes", err)
			return
		}
		if bs != nil {
			out.Boxes = bs
		}
	}
	server.WriteJSON(w, http.StatusOK, out)
}
