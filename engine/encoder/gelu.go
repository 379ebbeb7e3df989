package encoder

import "math"

// sqrt2OverPi is sqrt(2/pi), the constant of the tanh approximation of GELU.
var sqrt2OverPi = math.Sqrt(2 / math.Pi)

// GELU is the tanh approximation of the Gaussian error linear unit
// (Hendrycks and Gimpel 2016, as in GPT-2 and PyTorch's
// gelu(approximate="tanh")):
//
//	GELU(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
//
// evaluated in float64 from the float32 input and rounded to float32.
// GELU(0) = 0, GELU(1) ≈ 0.841192, GELU(-1) ≈ -0.158808.
func GELU(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(sqrt2OverPi*(v+0.044715*v*v*v))))
}
