package tune

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// JournalInfo summarises one journal for `tune status`.
type JournalInfo struct {
	Path       string    `json:"path"`
	ID         string    `json:"id"`
	Started    time.Time `json:"started"`
	Profile    Profile   `json:"profile"`
	Scope      string    `json:"scope"`
	Changes    int       `json:"changes"`
	Failed     int       `json:"failed"`
	Unfinished int       `json:"unfinished"` // change lines without a result: crash mid-apply
	// Held counts the changes still in effect: not undone, not rolled back.
	Held       int    `json:"held"`
	RolledBack bool   `json:"rolled_back"`
	Error      string `json:"error,omitempty"`
}

// Journals lists the journals in dir, oldest first.
func Journals(dir string) ([]JournalInfo, error) {
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) { // none there: an empty list
		return nil, err
	}
	var out []JournalInfo
	for _, d := range ents {
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".jsonl") {
			continue
		}
		p := filepath.Join(dir, d.Name())
		info := JournalInfo{Path: p}
		es, err := ReadJournal(p)
		if errors.Is(err, ErrEmptyJournal) {
			continue // nothing was changed under it
		}
		if err != nil {
			info.Error = err.Error()
			out = append(out, info)
			continue
		}
		info.ID, info.Started, info.Profile, info.Scope = es[0].ID, es[0].Time, es[0].Profile, es[0].Scope
		results := map[int]bool{}
		held, rb := heldChanges(es)
		info.Held = len(held)
		for _, en := range es {
			switch en.Type {
			case "change":
				info.Changes++
			case "result":
				results[en.Seq] = true
				if !en.OK {
					info.Failed++
				}
			}
		}
		// Rolled back: a complete rollback is recorded and no change was
		// made after it.
		info.RolledBack = rb && info.Held == 0
		for _, en := range es {
			if en.Type == "change" && !results[en.Seq] {
				info.Unfinished++
			}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// State says in words where a journal stands.
func (j JournalInfo) State() string {
	switch {
	case j.Error != "":
		return "unreadable: " + j.Error
	case j.RolledBack:
		return "rolled back"
	case j.Unfinished > 0:
		return "interrupted (crash during apply)"
	}
	return "applied"
}

// HeldChanges returns the change entries of the journal at path still in
// effect: not undone and not covered by a complete rollback, oldest first.
func HeldChanges(path string) ([]Entry, error) {
	es, err := ReadJournal(path)
	if errors.Is(err, ErrEmptyJournal) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	held, _ := heldChanges(es)
	return held, nil
}

// heldChanges: the changes after the last complete rollback, minus those
// undone; rolledBack says a complete rollback was recorded.
func heldChanges(es []Entry) (held []Entry, rolledBack bool) {
	undone := map[int]bool{}
	for _, en := range es {
		switch {
		case en.Type == "rollback" && en.OK:
			// A rollback covers every change written before it; a change
			// after it (an owner still at work) is held again.
			held, rolledBack = held[:0], true
		case en.Type == "change":
			held = append(held, en)
		case en.Type == "undo" && en.OK:
			undone[en.Seq] = true
		}
	}
	out := held[:0]
	for _, en := range held {
		if !undone[en.Seq] {
			out = append(out, en)
		}
	}
	return out, rolledBack
}
