package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/cocoonbox/cocoonbox/api/boxes"
	"github.com/cocoonbox/cocoonbox/api/config"
	"github.com/cocoonbox/cocoonbox/api/console"
	"github.com/cocoonbox/cocoonbox/api/database"
	"github.com/cocoonbox/cocoonbox/api/gw"
	controlv1 "github.com/cocoonbox/cocoonbox/api/proto/cocoonbox/control/v1"
	"github.com/cocoonbox/cocoonbox/api/server"
	"github.com/cocoonbox/cocoonbox/api/tokens"
	"github.com/cocoonbox/cocoonbox/api/usage"
	"github.com/cocoonbox/cocoonbox/api/vault"
)

// startUsage is model usage against cfg's gw (nil without gw.url): its
// admin key read from gw.master_key_file (a missing or empty file refuses
// the start).
func startUsage(cfg config.Config, db *database.DB, sealer *vault.Store, log *slog.Logger) (*usage.Service, error) {
	if cfg.GW.URL == "" {
		return nil, nil
	}
	data, err := os.ReadFile(cfg.GW.MasterKeyFile)
	if err != nil {
		return nil, fmt.Errorf("gw.master_key_file: %w", err)
	}
	master := strings.TrimSpace(string(data))
	if master == "" {
		return nil, fmt.Errorf("gw.master_key_file %s is empty: it holds gw's admin key", cfg.GW.MasterKeyFile)
	}
	return usage.New(db.Pool, gw.New(cfg.GW.URL, master, nil), sealer, cfg.GW.DefaultDailyCapMicros, nil, log), nil
}

// mountUsageConsole serves the console's Usage page and its call
// (usage.Console) from u's figures: not without a gw, where nothing is
// metered (the navigation leaves a section that is not built out).
func mountUsageConsole(srv *server.Server, u *usage.Service, con *console.Console, log *slog.Logger) {
	if u == nil {
		return
	}
	usage.NewConsole(u, con.UserID, log).Mount(srv)
	con.AddSection(console.Section{Title: "Usage", Path: "/cb/usage", Blurb: "What your model calls cost today and this month, against your daily cap.", Page: &usage.Page})
}

// usageHooks are what the box service takes of model usage (none without
// a gw).
func usageHooks(u *usage.Service) (boxes.GWKey, boxes.Usage) {
	if u == nil {
		return nil, nil
	}
	return u.Entry, func(ctx context.Context, user string, perModel bool) (*controlv1.UsageResponse, error) {
		f, err := u.Figures(ctx, user, perModel)
		if err != nil {
			return nil, err
		}
		out := &controlv1.UsageResponse{TodayMicros: f.Today, MonthMicros: f.Month, DailyCapMicros: f.DailyCapMicros,
			DefaultCap: f.DefaultCap, RemainingTodayMicros: f.RemainingToday}
		for _, name := range slices.Sorted(maps.Keys(f.Models)) {
			m := f.Models[name]
			out.Models = append(out.Models, &controlv1.ModelUsage{Model: name, Micros: m.Micros, PromptTokens: m.PromptTokens,
				CompletionTokens: m.CompletionTokens, Requests: m.Requests})
		}
		return out, nil
	}
}

// revokeOnChange revokes a user's gw key when every api hears the user
// was disabled or deleted (the token index's OnChange), and pushes their
// machines' entries without it.
func revokeOnChange(ctx context.Context, u *usage.Service, index *tokens.Index, push func(owner string), log *slog.Logger) {
	if u == nil {
		return
	}
	index.OnChange(func(user string) {
		revoked, err := u.Revoke(ctx, user)
		if err != nil {
			log.Warn("usage: the gw key was not revoked at gw; it stays in gw_revoke, and the next change of a user tries again", "user", user, "err", err)
		}
		if revoked {
			push(user)
		}
	})
}
