package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/cocoonbox/cocoonbox/tests/box"
)

func init() { register(30, "box API keys (the vault)", vaultStep) }

// vaultStep shows the claim env the api gave the box at its boot
// (COCOONBOX_VAULT and COCOONBOX_CONNECT, empty: the user has no keys
// yet), then adds, uses, rotates and removes a key through the api's key
// vault (vaultKeys). The demo writes no record of its own: the guest
// renderer's rules (a Connect grant, a variable-only record, a hostile
// one) are guest/vault's and tests/vault's tests. The wake step shows the
// api's entries coming back at the wake.
func vaultStep(ctx context.Context, d *demo, r *report) {
	own, err := d.box.ReadFile("/run/silkd.env")
	if err == nil && (!strings.Contains(string(own), "COCOONBOX_VAULT=") || !strings.Contains(string(own), "COCOONBOX_CONNECT=")) {
		err = fmt.Errorf("/run/silkd.env holds %q, want the api's COCOONBOX_VAULT and COCOONBOX_CONNECT", own)
	}
	r.check("api's claim env", err, "/run/silkd.env from the api at the boot: %s (no keys in the vault yet)",
		strings.Join(strings.Fields(string(own)), " "))
	vaultKeys(ctx, d, r)
}

func waitVault(b *box.Box, file, want string) (string, error) {
	var data []byte
	err := box.Until(20*time.Second, "/run/cocoonbox-vault/"+file+" holds "+want, func() (bool, string) {
		var err error
		data, err = b.ReadFile("/run/cocoonbox-vault/" + file)
		return err == nil && strings.Contains(string(data), want), fmt.Sprintf("%q (%v)", firstLine(string(data)), err)
	})
	return string(data), err
}
