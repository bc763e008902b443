// Package glapi reads the GL's HTTP API for the wallet: the journal entries of a transfer,
// asked by `wallet outbox reconcile` and by the console's transfer trace. Its JSON types are its
// own, written from the GL's published API (GET /v1/entries); it imports nothing of the GL, so
// the wallet binary carries none of the GL's code.
package glapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"walletgl/internal/metrics"
)

// DefaultTimeout bounds each request of a Client built by New.
const DefaultTimeout = 10 * time.Second

// Client asks the GL's API at BaseURL with APIKey (GL_API_KEY, a GL key with ledger:read).
type Client struct {
	BaseURL string
	APIKey  string
	HTTP    *http.Client
}

// New returns a client of the GL's API at baseURL.
func New(baseURL, apiKey string) *Client {
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), APIKey: apiKey, HTTP: &http.Client{Timeout: DefaultTimeout}}
}

// Entry is a journal entry as the GL's API shows it.
type Entry struct {
	ID         string    `json:"id"`
	EventID    string    `json:"event_id"`
	TransferID string    `json:"transfer_id"`
	Currency   string    `json:"currency"`
	OccurredAt time.Time `json:"occurred_at"`
	PostedAt   time.Time `json:"posted_at"`
	Lines      []Line    `json:"lines"`
}

// Line is one line of an entry.
type Line struct {
	AccountCode string `json:"account_code"`
	Direction   string `json:"direction"`
	Amount      int64  `json:"amount"`
}

// EntriesOfTransfer returns the GL's entries of the transfer (none: not posted yet).
func (c *Client) EntriesOfTransfer(ctx context.Context, transferID string) ([]Entry, error) {
	var out struct {
		Entries []Entry `json:"entries"`
	}
	if err := c.get(ctx, "/v1/entries?transfer_id="+url.QueryEscape(transferID), &out); err != nil {
		return nil, fmt.Errorf("ask the GL for the entries of transfer %s: %w", transferID, err)
	}
	return out.Entries, nil
}

// Totals reads the GL's GET /metrics (the key needs metrics:read): the console's pipeline
// header shows the GL's commit → posted latency from it.
func (c *Client) Totals(ctx context.Context) (metrics.Totals, error) {
	body, err := c.fetch(ctx, "/metrics")
	if err != nil {
		return metrics.Totals{}, fmt.Errorf("read the GL's metrics: %w", err)
	}
	return metrics.ParseTotals(bytes.NewReader(body))
}

func (c *Client) get(ctx context.Context, path string, v any) error {
	body, err := c.fetch(ctx, path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode the answer: %w", err)
	}
	return nil
}

// fetch GETs path and returns the body of a 200 answer (at most 4 MiB).
func (c *Client) fetch(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.APIKey)
	res, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", res.Status, clip(string(body), 200))
	}
	return body, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
