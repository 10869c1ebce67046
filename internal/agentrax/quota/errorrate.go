package quota

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// ParseErrorRate reads a percentage such as "2%" or "0.5%" and returns it as a fraction (0.02, 0.005). The
// number is plain decimal (digits with at most one dot; no sign, exponent, spaces or NaN) from 0 to 100.
func ParseErrorRate(s string) (float64, error) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, errors.New(`must be a percentage such as "2%"`)
	}
	if num == "" || strings.Count(num, ".") > 1 || num == "." {
		return 0, errors.New(`must be a number followed by "%", such as "2%" or "0.5%"`)
	}
	for _, r := range num {
		if (r < '0' || r > '9') && r != '.' {
			return 0, errors.New(`must be a plain decimal number followed by "%", such as "2%" or "0.5%"`)
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New(`must be a number followed by "%", such as "2%"`)
	}
	if v > 100 {
		return 0, errors.New("must be between 0% and 100%")
	}
	return v / 100, nil
}
