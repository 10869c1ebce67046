// Package extsync is the pure and I/O logic of ExternalAttributeSync: schedules, the SQL text check, record
// extraction and mapping, and the HTTP and SQL sources.
package extsync

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// MinInterval is the shortest duration schedule: a source polled more often is better served by a push.
const MinInterval = 10 * time.Second

// Schedule says when the next run is due.
type Schedule interface {
	// Next is the first run time after last.
	Next(last time.Time) time.Time
}

type every time.Duration

func (e every) Next(last time.Time) time.Time { return last.Add(time.Duration(e)) }

type cronSchedule struct{ s cron.Schedule }

func (c cronSchedule) Next(last time.Time) time.Time { return c.s.Next(last.UTC()) }

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// ParseSchedule accepts a Go duration of at least MinInterval or a 5-field cron expression (minute hour
// day-of-month month day-of-week, UTC). Descriptors such as @hourly and TZ= prefixes are refused so that the
// two forms cannot be confused.
func ParseSchedule(s string) (Schedule, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil {
		if d < MinInterval {
			return nil, fmt.Errorf("interval %s is shorter than %s", d, MinInterval)
		}
		return every(d), nil
	}
	if n := len(strings.Fields(s)); n != 5 {
		return nil, fmt.Errorf("%q is neither a Go duration (e.g. 15m) nor a 5-field cron expression (got %d fields)", s, n)
	}
	cs, err := cronParser.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("cron expression %q: %w", s, err)
	}
	return cronSchedule{cs}, nil
}
