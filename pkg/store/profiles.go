package store

import "fmt"

// Profile is the CPU profile of one sample's measured window (--profile).
type Profile struct {
	RunID     int64
	Seq       int // the sample's Seq
	Event     string
	Frequency int
	CPUs      int
	WindowNs  int64
	Samples   uint64
	Lost      uint64
	PeriodSum uint64
	// Folded is the folded-stack text ("comm;frame;leaf count" lines).
	Folded string
	// Missing says why a profiled sample has no profile ("" when it has).
	Missing string
}

// AddProfile stores one sample's profile.
func (d *DB) AddProfile(p *Profile) error {
	_, err := d.exec(`INSERT INTO profiles(run_id, seq, event, frequency, cpus, window_ns, samples, lost, period_sum, folded, missing)
		VALUES(?,?,?,?,?,?,?,?,?,?,?)`,
		p.RunID, p.Seq, p.Event, p.Frequency, p.CPUs, p.WindowNs, int64(p.Samples), int64(p.Lost), int64(p.PeriodSum), p.Folded, p.Missing)
	if err != nil {
		return fmt.Errorf("store profile of sample %d of run %d: %w", p.Seq, p.RunID, err)
	}
	return nil
}

// Profiles returns a run's profiles by sample seq (empty for a run
// measured without --profile).
func (d *DB) Profiles(runID int64) (map[int]*Profile, error) {
	rows, err := d.query(`SELECT seq, event, frequency, cpus, window_ns, samples, lost, period_sum, folded, missing
		FROM profiles WHERE run_id=? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("read profiles of run %d: %w", runID, err)
	}
	defer rows.Close()
	out := map[int]*Profile{}
	for rows.Next() {
		p := &Profile{RunID: runID}
		var samples, lost, period int64
		if err := rows.Scan(&p.Seq, &p.Event, &p.Frequency, &p.CPUs, &p.WindowNs, &samples, &lost, &period, &p.Folded, &p.Missing); err != nil {
			return nil, fmt.Errorf("read profiles of run %d: %w", runID, err)
		}
		p.Samples, p.Lost, p.PeriodSum = uint64(samples), uint64(lost), uint64(period)
		out[p.Seq] = p
	}
	return out, rows.Err()
}
