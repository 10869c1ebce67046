package targetsource

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"k8s.io/client-go/rest"
)

// cpuUse is where the machine's CPU time went, in seconds since boot or process start: the whole machine (busy
// and idle, from /proc/stat), the API server (its process_cpu_seconds_total), this benchmark process (the
// baseline client, the inventory server and the envtest manager serving the Target webhook) and the manager
// process. The rest of the busy time is etcd and whatever else runs on the machine. Differences between two
// snapshots say whether a phase was bound by CPU (no idle time left) and which process used it.
type cpuUse struct {
	busy, idle, apiserver, bench, manager float64
}

func takeCPU(ctx context.Context, b *testing.B, cfg *rest.Config, mgr *managerProcess) cpuUse {
	var u cpuUse
	_, u.apiserver = apiserverCounters(ctx, b, cfg)
	var ru syscall.Rusage
	must(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	u.bench = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	if mgr != nil {
		u.manager = mgr.cpuSeconds(ctx, b)
	}
	u.busy, u.idle = machineCPU(b)
	return u
}

// machineCPU reads the first line of /proc/stat (clock ticks of 1/100 s, summed over all cores).
func machineCPU(b *testing.B) (busy, idle float64) {
	data, err := os.ReadFile("/proc/stat")
	must(b, err)
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	for i, f := range fields[1:] {
		v, err := strconv.ParseFloat(f, 64)
		must(b, err)
		switch i {
		case 3, 4: // idle, iowait
			idle += v / 100
		case 8, 9: // guest time is already counted in user
		default:
			busy += v / 100
		}
	}
	return busy, idle
}

func (u cpuUse) sub(o cpuUse) cpuUse {
	return cpuUse{busy: u.busy - o.busy, idle: u.idle - o.idle, apiserver: u.apiserver - o.apiserver,
		bench: u.bench - o.bench, manager: u.manager - o.manager}
}

func (u cpuUse) row(name string) string {
	return fmt.Sprintf("%-40s %8.1fs %8.1fs %10.1fs %8.1fs %8.1fs %10.1fs", name, u.busy, u.idle, u.apiserver, u.bench,
		u.manager, u.busy-u.apiserver-u.bench-u.manager)
}

func cpuHeader() string {
	return fmt.Sprintf("%-40s %9s %9s %11s %9s %9s %11s", "CPU seconds in the phase", "busy", "idle", "apiserver",
		"bench", "manager", "etcd+rest")
}
