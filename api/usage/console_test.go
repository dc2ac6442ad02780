package usage_test

import (
	"testing"

	"github.com/cocoonbox/cocoonbox/api/gw"
	"github.com/cocoonbox/cocoonbox/api/usage"
)

// The console says an amount as a person does: to the cent, half a cent
// up, grouped by thousands, and a spend under half a cent as such rather
// than as nothing.
func TestDollarsAreSaidToTheCent(t *testing.T) {
	for micros, want := range map[int64]string{0: "$0.00", 1: "under $0.01", 4_999: "under $0.01", 5_000: "$0.01",
		15_504: "$0.02", 4_984_496: "$4.98", 5_000_000: "$5.00", 999_995_000: "$1,000.00", 1_234_567_890_000: "$1,234,567.89"} {
		if got := usage.Dollars(micros); got != want {
			t.Errorf("Dollars(%d) = %q, want %q", micros, got, want)
		}
	}
}

// A report over the cap says so, with nothing remaining; each model has
// today's and this month's figures, by name.
func TestAReportOverTheCapSaysNothingRemains(t *testing.T) {
	r := usage.NewReport(usage.Figures{Today: 12_420, Month: 30_000, DailyCapMicros: 10_000, RemainingToday: 0,
		Models:      map[string]gw.Metered{"b": {Micros: 20_000, Requests: 1_500, PromptTokens: 31_050, CompletionTokens: 70}, "a": {Micros: 10_000, Requests: 1}},
		ModelsToday: map[string]gw.Metered{"b": {Micros: 12_420}}})
	if !r.OverCap || r.Said["remaining_today"] != "$0.00" || r.Said["daily_cap"] != "$0.01" || r.Said["today"] != "$0.01" || r.Said["month"] != "$0.03" {
		t.Fatalf("over the cap: %+v", r)
	}
	if len(r.Models) != 2 || r.Models[0].Model != "a" || r.Models[0].Said["today"] != "$0.00" ||
		r.Models[1].Said["requests"] != "1,500" || r.Models[1].Said["tokens"] != "31,050 in, 70 out" || r.Models[1].Said["today"] != "$0.01" {
		t.Fatalf("the models: %+v", r.Models)
	}
	if under := usage.NewReport(usage.Figures{Today: 1, DailyCapMicros: 10_000, RemainingToday: 9_999}); under.OverCap {
		t.Fatalf("under the cap: %+v", under)
	}
}
