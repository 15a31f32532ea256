package stages

import (
	"encoding/json"
	"io"

	"github.com/cnibench/cnibench/pkg/store"
)

// ExplainHelp is `cnibench explain --help`'s description.
const ExplainHelp = `Explain compares two arms of a run measured with --profile: for each test and
size both have, the CPU per unit of work (CPU-µs per transaction for latency
and CRR tests, CPU-seconds per GB for streams) by datapath stage, the
difference B - A, and how sure each difference is (a two-sided Mann-Whitney
test over the repeats; one repeat gives no significance). Stages, and how a
stack is classified, are documented in docs/profiling.md.`

// ExplainCommand is `cnibench explain` as given: arms A and B of one
// stored run, optionally only one test.
type ExplainCommand struct {
	DBPath, Run, A, B, Test string
	JSON                    bool
}

// Print explains B against A, as text or, with JSON, one indented JSON
// document holding the run, the arms and the cells. An unknown run or arm
// and an unprofiled run are the store's and ErrNotProfiled errors.
func (c ExplainCommand) Print(w io.Writer) error {
	db, err := store.OpenExisting(c.DBPath)
	if err != nil {
		return err
	}
	defer db.Close()
	run, samples, err := db.Load(c.Run)
	if err != nil {
		return err
	}
	es, err := ExplainRun(db, run, samples, c.A, c.B, c.Test)
	if err != nil {
		return err
	}
	if !c.JSON {
		return WriteText(w, es)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"run": run.Name, "a": c.A, "b": c.B, "cells": es})
}
