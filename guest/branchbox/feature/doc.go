// Package feature is a feature run's life after its check: the launch of
// its managed Dev Container (prepare.go, up.go, cli.go, clear.go and the
// launch record, record.go), the provider started for a consumer
// (provider.go), the ledger of what materialize made (ledger.go) and the
// teardown that removes exactly that and writes the receipt (teardown.go,
// receipt.go). Each file's head comment says what its part does.
package feature
