// Package walletapi reads the wallet service's HTTP API for the GL: the transfers a
// reconciliation compares with the ledger (gl.TransferSource), each with the key of the entry
// that posts it (a batch's legs by their batch). Its JSON types are its own,
// written from the wallet's published API (GET /v1/transfers, GET /v1/transfers/{id}); it
// imports nothing of the wallet, so the GL binary carries none of the wallet's code.
package walletapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"walletgl/internal/gl"
)

// MaxPageSize is the largest page the wallet's GET /v1/transfers returns (its limit parameter
// is capped there).
const MaxPageSize = 1000

// DefaultTimeout bounds each request of a Client built without an http.Client.
const DefaultTimeout = 30 * time.Second

// Client reads transfers from the wallet's API at BaseURL.
type Client struct {
	BaseURL  string       // e.g. http://127.0.0.1:8080
	HTTP     *http.Client // nil: one with DefaultTimeout
	PageSize int          // transfers per request; 0 (or above MaxPageSize): MaxPageSize
	APIKey   string       // a wallet API key with transfers:read, sent as a bearer token
}

// New returns a client of the wallet API at baseURL.
func New(baseURL string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: &http.Client{Timeout: DefaultTimeout}}
}

var (
	_ gl.TransferSource = (*Client)(nil)
	_ gl.HoldSource     = (*Client)(nil)
)

// transfer is the part of the wallet's transfer resource a reconciliation needs; the wallet's
// other fields are ignored, so it may add fields without breaking the GL.
type transfer struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// ReversesTransferID is set on a reversal (a wallet before reversals never sends it).
	ReversesTransferID string `json:"reverses_transfer_id"`
	// BatchID is set on a leg of an atomic batch, BatchReversalID on a leg's reversal made by a
	// batch reversal: the GL posts either under that id, not the transfer's own (a wallet
	// before batches never sends them).
	BatchID         string `json:"batch_id"`
	BatchReversalID string `json:"batch_reversal_id"`
}

// page is one answer of GET /v1/transfers: transfers oldest first, and the opaque cursor of
// the next page (the request's own cursor when the page is empty).
type page struct {
	Transfers  []transfer `json:"transfers"`
	NextCursor string     `json:"next_cursor"`
}

func (t transfer) source() (gl.SourceTransfer, error) {
	if t.ID == "" || t.Currency == "" {
		return gl.SourceTransfer{}, fmt.Errorf("the wallet answered a transfer without an id or a currency: %+v", t)
	}
	return gl.SourceTransfer{ID: t.ID, Amount: t.Amount, Currency: t.Currency, ReversesTransferID: t.ReversesTransferID,
		EntryKey: t.entryKey()}, nil
}

// entryKey is the key of the GL entry that posts t, as reconcile_transfers_v4 tells it: a leg's
// batch, a leg reversal's batch reversal, else "" (the transfer's own id).
func (t transfer) entryKey() string {
	switch {
	case t.BatchID != "":
		return t.BatchID
	case t.BatchReversalID != "":
		return t.BatchReversalID
	}
	return ""
}

// Transfers pages through GET /v1/transfers until a page comes back shorter than asked.
func (c *Client) Transfers(ctx context.Context) ([]gl.SourceTransfer, error) {
	size := c.PageSize
	if size <= 0 || size > MaxPageSize {
		size = MaxPageSize
	}
	var out []gl.SourceTransfer
	cursor := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(size)}}
		if cursor != "" {
			q.Set("after", cursor)
		}
		var p page
		found, err := c.get(ctx, "/v1/transfers?"+q.Encode(), &p)
		if err != nil {
			return nil, err
		}
		if !found { // not the wallet's API at all: an empty listing would fake a verdict
			return nil, fmt.Errorf("ask the wallet: GET %s/v1/transfers: 404 Not Found (is WALLET_URL the wallet's API?)", c.BaseURL)
		}
		for _, t := range p.Transfers {
			st, err := t.source()
			if err != nil {
				return nil, err
			}
			out = append(out, st)
		}
		if p.NextCursor == "" { // null: the last page
			return out, nil
		}
		if p.NextCursor == cursor {
			return nil, fmt.Errorf("ask the wallet: a page of transfers with the same next_cursor as before (after %q)", cursor)
		}
		cursor = p.NextCursor
	}
}

// Transfer reads GET /v1/transfers/{id}; a 404 is found=false.
func (c *Client) Transfer(ctx context.Context, id string) (gl.SourceTransfer, bool, error) {
	var t transfer
	found, err := c.get(ctx, "/v1/transfers/"+url.PathEscape(id), &t)
	if err != nil || !found {
		return gl.SourceTransfer{}, false, err
	}
	st, err := t.source()
	return st, err == nil, err
}

// get fetches path into v; a 404 is found=false.
func (c *Client) get(ctx context.Context, path string, v any) (found bool, err error) {
	return c.getAllowing(ctx, path, v, http.StatusNotFound)
}

// getAllowing fetches path into v; an answer with status absent (404, or 405 too for a
// listing a wallet without it answers as a method of another route) is found=false.
func (c *Client) getAllowing(ctx context.Context, path string, v any, absent ...int) (found bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return false, fmt.Errorf("ask the wallet: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, fmt.Errorf("ask the wallet: %w", err)
	}
	defer resp.Body.Close()
	for _, status := range absent {
		if resp.StatusCode == status {
			return false, nil
		}
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return false, fmt.Errorf("ask the wallet: GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return false, fmt.Errorf("ask the wallet: decode GET %s: %w", path, err)
	}
	return true, nil
}

// hold is the part of the wallet's hold resource a reconciliation needs (GET /v1/holds,
// GET /v1/holds/{id}); its other fields are ignored.
type hold struct {
	ID       string `json:"id"`
	WalletID string `json:"wallet_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Status   string `json:"status"`
}

// holdPage is one answer of GET /v1/holds, paged like GET /v1/transfers.
type holdPage struct {
	Holds      []hold `json:"holds"`
	NextCursor string `json:"next_cursor"`
}

func (h hold) source() (gl.SourceHold, error) {
	if h.ID == "" || h.Currency == "" || h.Status == "" {
		return gl.SourceHold{}, fmt.Errorf("the wallet answered a hold without an id, a currency or a status: %+v", h)
	}
	return gl.SourceHold{ID: h.ID, WalletID: h.WalletID, Amount: h.Amount, Currency: h.Currency, Status: h.Status}, nil
}

// Holds pages through GET /v1/holds. A wallet without that listing (404, or 405 from its
// POST /v1/holds) publishes no holds: gl.ErrNoHolds.
func (c *Client) Holds(ctx context.Context) ([]gl.SourceHold, error) {
	size := c.PageSize
	if size <= 0 || size > MaxPageSize {
		size = MaxPageSize
	}
	out := []gl.SourceHold{}
	cursor := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(size)}}
		if cursor != "" {
			q.Set("after", cursor)
		}
		var p holdPage
		found, err := c.getAllowing(ctx, "/v1/holds?"+q.Encode(), &p, http.StatusNotFound, http.StatusMethodNotAllowed)
		if err != nil {
			return nil, err
		}
		if !found {
			if cursor != "" {
				return nil, fmt.Errorf("ask the wallet: GET %s/v1/holds: not found after its first page", c.BaseURL)
			}
			return nil, fmt.Errorf("ask the wallet: GET %s/v1/holds: %w", c.BaseURL, gl.ErrNoHolds)
		}
		for _, h := range p.Holds {
			sh, err := h.source()
			if err != nil {
				return nil, err
			}
			out = append(out, sh)
		}
		if p.NextCursor == "" {
			return out, nil
		}
		if p.NextCursor == cursor {
			return nil, fmt.Errorf("ask the wallet: a page of holds with the same next_cursor as before (after %q)", cursor)
		}
		cursor = p.NextCursor
	}
}

// Hold reads GET /v1/holds/{id}; a 404 is found=false.
func (c *Client) Hold(ctx context.Context, id string) (gl.SourceHold, bool, error) {
	var h hold
	found, err := c.get(ctx, "/v1/holds/"+url.PathEscape(id), &h)
	if err != nil || !found {
		return gl.SourceHold{}, false, err
	}
	sh, err := h.source()
	return sh, err == nil, err
}
