package postgres

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/jackc/pgx/v5/pgtype"

	"walletgl/internal/gl"
)

// sumFrom is the one place where a numeric sum over journal lines becomes a gl.Sum. Every such
// sum is numeric in SQL (db/queries/gl), so it holds any total of int64 amounts; it is an
// integer, which pgx may still hand over as digits times a power of ten.
func sumFrom(n pgtype.Numeric) (gl.Sum, error) {
	switch {
	case !n.Valid:
		return gl.Sum{}, errors.New("read sum: null")
	case n.NaN || n.InfinityModifier != pgtype.Finite:
		return gl.Sum{}, errors.New("read sum: not a finite number")
	case n.Int == nil:
		return gl.Sum{}, nil
	}
	i := new(big.Int).Set(n.Int)
	if n.Exp != 0 {
		scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(n.Exp))), nil)
		if n.Exp > 0 {
			i.Mul(i, scale)
		} else if _, rem := i.QuoRem(i, scale, new(big.Int)); rem.Sign() != 0 {
			return gl.Sum{}, fmt.Errorf("read sum: %se%d is not a whole number of minor units", n.Int, n.Exp)
		}
	}
	return gl.NewSum(i), nil
}

// debitsCredits reads a row's debits and credits.
func debitsCredits(debits, credits pgtype.Numeric) (gl.Sum, gl.Sum, error) {
	d, err := sumFrom(debits)
	if err != nil {
		return gl.Sum{}, gl.Sum{}, err
	}
	c, err := sumFrom(credits)
	return d, c, err
}

func abs(n int32) int32 {
	if n < 0 {
		return -n
	}
	return n
}
