package snowflake

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxSpec bounds the length of a textual layout spec or node list.
const maxSpec = 1024

// ParseLayout parses a layout from text, as a CLI flag or a config file
// carries it. The text is either the name of a built-in layout ("twitter"),
// a built-in name followed by overrides of its epoch or name
// ("baidu,epoch=2024-11-20"), or a full spec: comma-separated key=value items,
//
//	time=<bits>:<unit>      time field width and tick length (Go duration: 1ms, 10ms, 1s)
//	epoch=<instant>         RFC 3339 ("2010-11-04T01:42:54.657Z"), a UTC date
//	                        ("2016-05-20") or integer Unix milliseconds
//	seq=<bits>[:rand[<k>]]  sequence width; rand<k> starts each tick at a random
//	                        value in [0,k), bare rand in [0,2^bits)
//	<field>=<bits>          a node field (datacenter, worker, shard, ...)
//	name=<name>             optional layout name
//
// Node fields and seq are laid out below time in the order written, most
// significant first. For example Twitter's layout is
//
//	time=41:1ms,datacenter=5,worker=5,seq=12,epoch=2010-11-04T01:42:54.657Z
//
// Keys are case-insensitive; spaces around items are ignored. Errors are
// *FieldErrors naming the item and wrap ErrInvalidLayout. Layout.String
// returns text ParseLayout accepts.
func ParseLayout(text string) (Layout, error) {
	if len(text) > maxSpec {
		return Layout{}, layoutErr("layout spec", text[:32]+"...", "longer than %d bytes", maxSpec)
	}
	items := strings.Split(text, ",")
	first := strings.TrimSpace(items[0])
	if first == "" {
		return Layout{}, layoutErr("layout spec", text, "is empty: give a built-in name (%s) or a spec like time=41:1ms,worker=10,seq=12,epoch=2010-11-04T01:42:54.657Z", strings.Join(LayoutNames(), ", "))
	}
	if !strings.Contains(first, "=") {
		base, ok := Lookup(first)
		if !ok {
			return Layout{}, layoutErr("layout", first, "is not a built-in layout (%s) nor a spec of key=value items", strings.Join(LayoutNames(), ", "))
		}
		s := base.spec()
		for _, item := range items[1:] {
			key, val, err := splitItem(item)
			if err != nil {
				return Layout{}, err
			}
			switch key {
			case "epoch":
				if s.Epoch, err = parseEpoch(val); err != nil {
					return Layout{}, err
				}
				s.Note = "re-based " + base.name + " layout"
			case "name":
				s.Name = val
			default:
				return Layout{}, layoutErr(key, val, "only epoch= and name= may follow a built-in layout name; write a full spec to change fields")
			}
		}
		return NewLayout(s)
	}
	var s LayoutSpec
	var haveTime, haveEpoch bool
	for _, item := range items {
		key, val, err := splitItem(item)
		if err != nil {
			return Layout{}, err
		}
		switch key {
		case "time":
			if haveTime {
				return Layout{}, layoutErr("time", val, "given twice")
			}
			haveTime = true
			b, u, ok := strings.Cut(val, ":")
			if !ok {
				return Layout{}, layoutErr("time", val, "must be <bits>:<unit>, e.g. 41:1ms")
			}
			if s.TimeBits, err = parseBits("time bits", b); err != nil {
				return Layout{}, err
			}
			if s.Unit, err = time.ParseDuration(strings.TrimSpace(u)); err != nil {
				return Layout{}, layoutErr("time unit", u, "is not a duration like 1ms, 10ms or 1s")
			}
		case "epoch":
			if haveEpoch {
				return Layout{}, layoutErr("epoch", val, "given twice")
			}
			haveEpoch = true
			if s.Epoch, err = parseEpoch(val); err != nil {
				return Layout{}, err
			}
		case "name":
			s.Name = val
		case Seq, "sequence":
			b, start, hasStart := strings.Cut(val, ":")
			bitsN, err := parseBits("seq bits", b)
			if err != nil {
				return Layout{}, err
			}
			s.Fields = append(s.Fields, Field{Name: Seq, Bits: bitsN})
			if hasStart {
				k, ok := strings.CutPrefix(strings.TrimSpace(start), "rand")
				switch {
				case !ok:
					return Layout{}, layoutErr("seq start", start, "must be rand or rand<k>, e.g. rand100")
				case k == "":
					if bitsN >= 1 && bitsN <= 62 {
						s.SeqStart = 1 << uint(bitsN)
					}
				default:
					n, err := strconv.ParseInt(k, 10, 64)
					if err != nil || n < 2 {
						return Layout{}, layoutErr("seq start", start, "rand<k> needs an integer k >= 2")
					}
					s.SeqStart = n
				}
			}
		default:
			n, err := parseBits(key+" bits", val)
			if err != nil {
				return Layout{}, err
			}
			s.Fields = append(s.Fields, Field{Name: key, Bits: n})
		}
	}
	if !haveTime {
		return Layout{}, layoutErr("time", "", "missing: add time=<bits>:<unit>, e.g. time=41:1ms")
	}
	if !haveEpoch {
		return Layout{}, layoutErr("epoch", "", "missing: add epoch=<RFC 3339 time, date or Unix ms>")
	}
	return NewLayout(s)
}

func splitItem(item string) (key, val string, err error) {
	k, v, ok := strings.Cut(item, "=")
	k = strings.ToLower(strings.TrimSpace(k))
	v = strings.TrimSpace(v)
	if !ok || k == "" || v == "" {
		return "", "", layoutErr("layout item", strings.TrimSpace(item), "must be key=value")
	}
	return k, v, nil
}

func parseBits(field, s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, layoutErr(field, s, "is not an integer")
	}
	return n, nil
}

// parseEpoch accepts RFC 3339, a UTC date, or integer Unix milliseconds.
func parseEpoch(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 && ms < 253402300800000 {
		return time.UnixMilli(ms).UTC(), nil
	}
	return time.Time{}, layoutErr("epoch", s, "must be an RFC 3339 time (2010-11-04T01:42:54.657Z), a date (2016-05-20) or Unix milliseconds")
}

// String returns the layout as a spec ParseLayout accepts, without its name:
// time first, then the fields in order, then the epoch.
func (l Layout) String() string {
	if l.IsZero() {
		return "<invalid layout>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "time=%d:%v", l.timeBits, l.unit)
	for _, f := range l.fields {
		fmt.Fprintf(&b, ",%s=%d", f.Name, f.Bits)
		if f.Name == Seq && l.seqStart > 0 {
			if l.seqStart == 1<<l.seqBits {
				b.WriteString(":rand")
			} else {
				fmt.Fprintf(&b, ":rand%d", l.seqStart)
			}
		}
	}
	b.WriteString(",epoch=")
	b.WriteString(l.epoch.Format(time.RFC3339Nano))
	return b.String()
}

// ParseNode parses node values written as "worker=3,datacenter=1" into a
// map for Settings.Node. Names are lowercased; values are non-negative
// integers. It does not check them against a layout: New does.
func ParseNode(text string) (map[string]int64, error) {
	out := map[string]int64{}
	text = strings.TrimSpace(text)
	if text == "" {
		return out, nil
	}
	if len(text) > maxSpec {
		return nil, &FieldError{Field: "node", Value: text[:32] + "...", Reason: fmt.Sprintf("longer than %d bytes", maxSpec), Err: ErrInvalidNode}
	}
	for _, item := range strings.Split(text, ",") {
		k, v, ok := strings.Cut(item, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, &FieldError{Field: "node", Value: strings.TrimSpace(item), Reason: "must be name=value, e.g. worker=3", Err: ErrInvalidNode}
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, &FieldError{Field: k, Value: v, Reason: "must be a non-negative integer", Err: ErrInvalidNode}
		}
		if _, dup := out[k]; dup {
			return nil, &FieldError{Field: k, Value: v, Reason: "given twice", Err: ErrInvalidNode}
		}
		out[k] = n
	}
	return out, nil
}
