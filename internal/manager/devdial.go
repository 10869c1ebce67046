package manager

import (
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quartet-dev/quartet-operator/internal/devdial"
)

// peerDial reads QUARTET_DEV_DIAL_MAP, once per manager, into the map every client of an in-cluster peer dials
// through: Options.DevDialMap when a test or `make dev` set one, else the variable's own map; nil when neither
// lists anything, so production dials plainly. A set map is logged at start: it reroutes connections, and must
// never be set in a real cluster.
func (o *Options) peerDial() (*devdial.Map, error) {
	fromEnv, err := devdial.FromEnv()
	if err != nil {
		return nil, err // names the variable and the entry
	}
	m := o.DevDialMap
	switch {
	case m == nil:
		m = fromEnv
	case fromEnv != nil:
		if err := m.Add(fromEnv.String()); err != nil {
			return nil, err
		}
	}
	if m != nil {
		ctrl.Log.WithName("devdial").Info("DEVELOPMENT ONLY: connections to in-cluster peers are sent to other "+
			"addresses; never set "+devdial.EnvVar+" in a real cluster", "map", m.String())
	}
	return m, nil
}
