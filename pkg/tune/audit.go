package tune

// Finding is one line of an audit: one target of one knob under one profile.
type Finding struct {
	Knob        string  `json:"knob"`
	Title       string  `json:"title"`
	Scope       Scope   `json:"scope"`
	Netns       string  `json:"netns,omitempty"`
	Target      string  `json:"target,omitempty"`
	Profile     Profile `json:"profile"`
	Current     string  `json:"current"`
	Recommended string  `json:"recommended,omitempty"`
	Status      Status  `json:"status"`
	Why         string  `json:"why,omitempty"`
	Source      string  `json:"source,omitempty"`
	Access      string  `json:"access"`
	AuditOnly   bool    `json:"audit_only,omitempty"`

	want string
	cur  Current
	knob *Knob
}

// Audit reads every knob in ks and judges it against each profile.
func Audit(e *Env, ks []*Knob, profiles []Profile) []Finding {
	var out []Finding
	for _, k := range ks {
		curs, err := readKnob(e, k)
		for _, p := range profiles {
			rec, hasRec := k.Recs[p]
			src := k.Source
			if hasRec {
				src = rec.Source
			}
			base := Finding{Knob: k.ID, Title: k.Title, Scope: k.Scope, Netns: e.Netns, Profile: p,
				Source: src, Access: k.Access, AuditOnly: k.AuditOnly, knob: k}
			if hasRec {
				base.Recommended = rec.Value
			}
			if err != nil {
				f := base
				f.Status, f.Why = StatusCannotRead, err.Error()
				out = append(out, f)
				continue
			}
			for _, c := range curs {
				f := base
				f.Target, f.Current, f.cur = c.Target, c.Value, c
				switch {
				case c.Err != nil:
					f.Status, f.Why = StatusCannotRead, c.Err.Error()
				case !hasRec:
					f.Status = StatusNoRec
					if k.Why != "" {
						f.Why = k.Why
					}
				default:
					f.Status, f.want, f.Why = judge(e, k, c, rec.Value)
					if f.Why == "" && k.AuditOnly && f.Status == StatusDiffers {
						f.Why = k.Why
					}
				}
				out = append(out, f)
			}
		}
	}
	return out
}

// AuditNetns audits the per-namespace knobs of ks inside each namespace of
// nss, and the MTU consistency check once across all of them (it compares
// pods with tunnels); nss empty audits ks on the host.
func AuditNetns(e *Env, ks []*Knob, profiles []Profile, nss []string) []Finding {
	if len(nss) == 0 {
		return Audit(e, ks, profiles)
	}
	var netKs, once []*Knob
	for _, k := range ks {
		switch {
		case k.ID == "mtu.consistency":
			once = append(once, k)
		case k.Scope == ScopeNetns:
			netKs = append(netKs, k)
		}
	}
	var fs []Finding
	for _, n := range nss {
		fs = append(fs, Audit(e.WithNetns(n), netKs, profiles)...)
	}
	c := *e
	c.LabNetns = nss
	return append(fs, Audit(&c, once, profiles)...)
}

func readKnob(e *Env, k *Knob) (curs []Current, err error) {
	read := func() error {
		var rerr error
		curs, rerr = k.Read(e)
		return rerr
	}
	if k.Scope == ScopeNetns {
		err = e.do(read)
	} else {
		err = read()
	}
	return curs, err
}

func judge(e *Env, k *Knob, c Current, rec string) (Status, string, string) {
	if k.Judge != nil {
		return k.Judge(e, c, rec)
	}
	if norm(c.Value) == norm(rec) {
		return StatusOK, "", ""
	}
	return StatusDiffers, rec, ""
}
