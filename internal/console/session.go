package console

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"sync"
	"time"
)

// Session lifetimes: a session ends after IdleTimeout without a request, and MaxAge after it
// began whatever happens. The key itself stays valid; the browser must be given it again.
const (
	IdleTimeout = 30 * time.Minute
	MaxAge      = 12 * time.Hour
	// maxSessions bounds the memory sessions take; past it the oldest-expiring one goes.
	maxSessions = 10000
)

// session is one browser's login: the API key it was given (kept here, never sent back), who
// that key is, and the token its forms must carry.
type session struct {
	id      string
	secret  string // the API key, checked again at every request (revocation, scopes, rate)
	keyName string
	csrf    string
	idleEnd time.Time
	end     time.Time
	flash   Flash // a message for the next page, after a redirect
}

// sessions is a service's console sessions, in its memory: a restart logs everyone out.
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	now  func() time.Time
}

func newSessions() *sessions {
	return &sessions{byID: map[string]*session{}, now: time.Now}
}

// create starts a session for a key that was just verified.
func (s *sessions) create(secret, keyName string) (session, error) {
	id, err := randomToken()
	if err != nil {
		return session{}, err
	}
	csrf, err := randomToken()
	if err != nil {
		return session{}, err
	}
	now := s.now()
	sess := &session{id: id, secret: secret, keyName: keyName, csrf: csrf, idleEnd: now.Add(IdleTimeout), end: now.Add(MaxAge)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= maxSessions {
		s.evictOne()
	}
	s.byID[id] = sess
	return *sess, nil
}

// get returns the live session with this id and extends its idle time.
func (s *sessions) get(id string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byID[id]
	if !ok {
		return session{}, false
	}
	now := s.now()
	if now.After(sess.idleEnd) || now.After(sess.end) {
		delete(s.byID, id)
		return session{}, false
	}
	sess.idleEnd = now.Add(IdleTimeout)
	return *sess, true
}

// setFlash leaves a message for the session's next page.
func (s *sessions) setFlash(id string, msg Flash) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.byID[id]; ok {
		sess.flash = msg
	}
}

// popFlash returns the session's message once.
func (s *sessions) popFlash(id string) Flash {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byID[id]
	if !ok {
		return Flash{}
	}
	msg := sess.flash
	sess.flash = Flash{}
	return msg
}

func (s *sessions) delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, id)
}

// sweep forgets the sessions that have ended.
func (s *sessions) sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, sess := range s.byID {
		if now.After(sess.idleEnd) || now.After(sess.end) {
			delete(s.byID, id)
		}
	}
}

// evictOne drops the session closest to its idle end; s.mu is held.
func (s *sessions) evictOne() {
	var victim *session
	for _, sess := range s.byID {
		if victim == nil || sess.idleEnd.Before(victim.idleEnd) {
			victim = sess
		}
	}
	if victim != nil {
		delete(s.byID, victim.id)
	}
}

func (s *sessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// randomToken is 32 random bytes, base64url: a session id or a CSRF token nobody can guess.
func randomToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", errors.Join(errors.New("new console token"), err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}
