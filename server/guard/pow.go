package guard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Algorithm names the proof of work clients must perform.
const powAlgorithm = "sha256-leading-zero-bits"

// Challenge payload layout: version, id, issued-at, expires-at, difficulty.
const (
	challengeVersion = 1
	challengeIDLen   = 16
	payloadLen       = 1 + challengeIDLen + 8 + 8 + 1
	// maxChallengeLen bounds the header before any decoding work.
	maxChallengeLen = 256
	// maxSolutionDigits fits every uint64 counter.
	maxSolutionDigits = 20
	// clockSkew tolerates replicas whose clocks disagree a little.
	clockSkew = time.Minute
	// maxSolveDifficulty bounds Solve: beyond it a solution is out of reach.
	maxSolveDifficulty = 64
)

var b64 = base64.RawURLEncoding.Strict()

// Challenge is a signed proof-of-work challenge.
type Challenge struct {
	Token      string // opaque, URL- and header-safe (base64url segments joined by '.')
	Difficulty int
	Algorithm  string // "sha256-leading-zero-bits"
	ExpiresAt  time.Time
}

// Challenge issues a fresh signed challenge at the current difficulty
// (which may be 0).
func (c *Chain) Challenge() Challenge {
	now := c.clock.Now()
	d := c.Difficulty()
	exp := now.Add(c.pow.TTL).Unix()
	var p [payloadLen]byte
	p[0] = challengeVersion
	rand.Read(p[1 : 1+challengeIDLen]) // never fails (crypto/rand aborts instead)
	binary.BigEndian.PutUint64(p[17:25], uint64(now.Unix()))
	binary.BigEndian.PutUint64(p[25:33], uint64(exp))
	p[33] = byte(d)
	return Challenge{
		Token:      b64.EncodeToString(p[:]) + "." + b64.EncodeToString(c.sign(p[:])),
		Difficulty: d,
		Algorithm:  powAlgorithm,
		ExpiresAt:  time.Unix(exp, 0),
	}
}

func (c *Chain) sign(payload []byte) []byte {
	m := hmac.New(sha256.New, c.secret)
	m.Write(payload)
	return m.Sum(nil)
}

// verifiedChallenge is a checked challenge, ready to be spent.
type verifiedChallenge struct {
	id      string // hex of the 16-byte id: the replay key
	expires time.Time
}

// verifyPoW checks a challenge and its solution against the signature, the
// clock, the base difficulty and the challenge's own signed difficulty.
func (c *Chain) verifyPoW(token, solution string) (verifiedChallenge, *Rejection) {
	token, solution = strings.TrimSpace(token), strings.TrimSpace(solution)
	if token == "" || solution == "" {
		return verifiedChallenge{}, powRejection(http.StatusPreconditionRequired, "challenge_required",
			"This faucet asks for a proof of work: fetch a challenge from POST /faucet/v1/challenge, solve it and send it in the X-Faucet-Challenge and X-Faucet-Solution headers.")
	}
	p, ok := c.openChallenge(token)
	if !ok {
		return verifiedChallenge{}, invalidChallenge("The challenge is malformed or was not issued by this faucet: fetch a new one from POST /faucet/v1/challenge.")
	}
	now := c.clock.Now()
	issued := int64(binary.BigEndian.Uint64(p[17:25]))
	expires := int64(binary.BigEndian.Uint64(p[25:33]))
	d := int(p[33])
	if issued < 0 || expires < 0 || time.Unix(issued, 0).After(now.Add(clockSkew)) {
		return verifiedChallenge{}, invalidChallenge("The challenge is malformed or was not issued by this faucet: fetch a new one from POST /faucet/v1/challenge.")
	}
	exp := time.Unix(expires, 0)
	if !now.Before(exp) {
		return verifiedChallenge{}, powRejection(http.StatusBadRequest, "challenge_expired",
			"The challenge has expired: fetch a new one from POST /faucet/v1/challenge and solve it within its lifetime.")
	}
	// Below the current difficulty (base or raised) is refused, so
	// challenges hoarded while the faucet was quiet are worthless once it
	// raises; the page simply fetches a new one.
	if d < c.Difficulty() {
		return verifiedChallenge{}, invalidChallenge("The challenge's difficulty is below what this faucet now requires: fetch a new one from POST /faucet/v1/challenge.")
	}
	if !validSolution(solution) || !meetsDifficulty(token, solution, d) {
		return verifiedChallenge{}, invalidChallenge("The solution does not solve the challenge: send a decimal counter for which SHA-256(challenge \":\" counter) starts with the challenge's number of zero bits.")
	}
	return verifiedChallenge{id: hex.EncodeToString(p[1 : 1+challengeIDLen]), expires: exp}, nil
}

// openChallenge decodes a token and checks its signature.
func (c *Chain) openChallenge(token string) ([payloadLen]byte, bool) {
	var p [payloadLen]byte
	if len(token) > maxChallengeLen {
		return p, false
	}
	ps, ms, ok := strings.Cut(token, ".")
	if !ok {
		return p, false
	}
	payload, err := b64.DecodeString(ps)
	if err != nil || len(payload) != payloadLen || payload[0] != challengeVersion {
		return p, false
	}
	mac, err := b64.DecodeString(ms)
	if err != nil || !hmac.Equal(mac, c.sign(payload)) {
		return p, false
	}
	copy(p[:], payload)
	return p, true
}

func powRejection(status int, reason, msg string) *Rejection {
	return &Rejection{Check: CheckProofOfWork, Status: status, Reason: reason, Message: msg}
}

func invalidChallenge(msg string) *Rejection {
	return powRejection(http.StatusBadRequest, "challenge_invalid", msg)
}

// validSolution accepts 1 to 20 ASCII digits.
func validSolution(s string) bool {
	if len(s) == 0 || len(s) > maxSolutionDigits {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func meetsDifficulty(token, solution string, d int) bool {
	buf := make([]byte, 0, len(token)+1+len(solution))
	buf = append(append(append(buf, token...), ':'), solution...)
	sum := sha256.Sum256(buf)
	return leadingZeroBits(&sum) >= d
}

func leadingZeroBits(sum *[32]byte) int {
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

// Solve finds a solution for a challenge token at difficulty: the decimal
// counter string. It stops with ctx's error when ctx ends first.
func Solve(ctx context.Context, token string, difficulty int) (string, error) {
	if token == "" {
		return "", errors.New("guard: solve: empty challenge")
	}
	if difficulty < 0 || difficulty > maxSolveDifficulty {
		return "", fmt.Errorf("guard: solve: difficulty %d is outside 0..%d", difficulty, maxSolveDifficulty)
	}
	prefix := append([]byte(token), ':')
	buf := make([]byte, 0, len(prefix)+maxSolutionDigits)
	for n := uint64(0); ; n++ {
		if n&0xfff == 0 {
			if err := ctx.Err(); err != nil {
				return "", fmt.Errorf("guard: solve at difficulty %d stopped after %d attempts: %w", difficulty, n, err)
			}
		}
		buf = strconv.AppendUint(append(buf[:0], prefix...), n, 10)
		sum := sha256.Sum256(buf)
		if leadingZeroBits(&sum) >= difficulty {
			return strconv.FormatUint(n, 10), nil
		}
		if n == ^uint64(0) {
			return "", fmt.Errorf("guard: solve at difficulty %d: counter space exhausted", difficulty)
		}
	}
}
