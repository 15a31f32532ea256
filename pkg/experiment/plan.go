package experiment

// Step is one measurement in the run order.
type Step struct {
	Seq     int // position in the run, from 0
	Repeat  int // from 0
	Arm     int // index into Experiment.Arms
	Test    string
	MsgSize int
	// RetakeOf is the Seq of the disturbed step this one measures again
	// (--retake-disturbed); nil for a planned step.
	RetakeOf *int
}

// Plan returns every step of the experiment in run order.
//
// Interleaved order runs, for each repeat, every (test, size) cell across all
// arms before the next repeat: A B C A B C … Slow drift on the host (thermal,
// a noisy neighbour, page cache) then lands on every arm alike instead of on
// whichever arm ran last. The arm order is rotated each repeat so that no arm
// always runs first after a topology switch.
func (e *Experiment) Plan() []Step {
	type cell struct {
		test string
		size int
	}
	var cells []cell
	for _, t := range e.Tests {
		for _, s := range e.Sizes(t) {
			cells = append(cells, cell{t, int(s)})
		}
	}
	runs := func(arm int, c cell) bool { return contains(e.ArmTests(&e.Arms[arm]), c.test) }
	var steps []Step
	add := func(r, arm int, c cell) {
		if runs(arm, c) {
			steps = append(steps, Step{Seq: len(steps), Repeat: r, Arm: arm, Test: c.test, MsgSize: c.size})
		}
	}
	n := len(e.Arms)
	if e.Order == "sequential" {
		for a := 0; a < n; a++ {
			for _, c := range cells {
				for r := 0; r < e.Repeats; r++ {
					add(r, a, c)
				}
			}
		}
		return steps
	}
	for r := 0; r < e.Repeats; r++ {
		for _, c := range cells {
			for i := 0; i < n; i++ {
				add(r, (i+r)%n, c)
			}
		}
	}
	return steps
}
