package steps

import (
	"context"
	"testing"
)

// Without a timeline in the context, Begin and its end do nothing.
func TestBeginWithoutATimelineDoesNothing(t *testing.T) {
	end := Begin(context.Background(), "x")
	end()
	if From(context.Background()) != nil {
		t.Fatal("a timeline from a bare context")
	}
}

// Each step is recorded with its start and end, in the order the steps
// ended; a step that comes twice is summed.
func TestStepsAreRecordedInTheOrderTheyEnded(t *testing.T) {
	tl := New()
	ctx := With(context.Background(), tl)
	outer := Begin(ctx, "outer")
	inner := Begin(ctx, "inner")
	inner()
	outer()
	again := Begin(ctx, "inner")
	again()
	sp := tl.Spans()
	if len(sp) != 3 || sp[0].Step != "inner" || sp[1].Step != "outer" || sp[2].Step != "inner" {
		t.Fatalf("spans %+v, want inner, outer, inner", sp)
	}
	if sp[0].Took() < 0 || sp[1].Start > sp[0].Start || sp[1].End < sp[0].End {
		t.Fatalf("outer %+v does not hold inner %+v", sp[1], sp[0])
	}
	if sum := tl.Sum(); sum["inner"] != sp[0].Took()+sp[2].Took() {
		t.Fatalf("sum %v, want both inner spans", sum)
	}
}
