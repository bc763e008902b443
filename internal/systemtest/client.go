package systemtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Client speaks JSON to one service's HTTP API.
type Client struct {
	Base string
	HTTP *http.Client
	Key  string // the API key every request sends (Process.CreateKey)
}

// NewClient returns a client for the service at addr (host:port).
func NewClient(addr string) *Client {
	return &Client{Base: "http://" + addr, HTTP: &http.Client{Timeout: 10 * time.Second}}
}

// Response is a status code and a raw body.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Decode parses the body into v.
func (r Response) Decode(v any) error {
	if err := json.Unmarshal(r.Body, v); err != nil {
		return fmt.Errorf("decode %d response %q: %w", r.Status, r.Body, err)
	}
	return nil
}

// Do sends method path with body (JSON-encoded unless nil) and headers.
func (c *Client) Do(ctx context.Context, method, path string, body any, headers map[string]string) (Response, error) {
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return Response{}, fmt.Errorf("encode request: %w", err)
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, reader)
	if err != nil {
		return Response{}, fmt.Errorf("new request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("read %s %s: %w", method, path, err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// Reverse posts a reversal of amount of transfer id with the idempotency key and returns the
// raw response.
func (c *Client) Reverse(ctx context.Context, key, id string, amount int64) (Response, error) {
	return c.Do(ctx, http.MethodPost, "/v1/transfers/"+id+"/reversal", map[string]any{"amount": amount},
		map[string]string{"Idempotency-Key": key})
}

// ForceReverse posts a forced reversal (a chargeback, which needs transfers:admin) of amount of
// transfer id.
func (c *Client) ForceReverse(ctx context.Context, key, id string, amount int64) (Response, error) {
	return c.Do(ctx, http.MethodPost, "/v1/transfers/"+id+"/reversal", map[string]any{"amount": amount, "force": true},
		map[string]string{"Idempotency-Key": key})
}

// TransferRequest is the body of POST /v1/transfers.
type TransferRequest struct {
	FromWalletID string `json:"from_wallet_id"`
	ToWalletID   string `json:"to_wallet_id"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
}

// Transfer is the wallet API's transfer.
type Transfer struct {
	ID             string    `json:"id"`
	IdempotencyKey string    `json:"idempotency_key"`
	FromWalletID   string    `json:"from_wallet_id"`
	ToWalletID     string    `json:"to_wallet_id"`
	Amount         int64     `json:"amount"`
	Currency       string    `json:"currency"`
	Status         string    `json:"status"`
	OutboxStatus   string    `json:"outbox_status"`
	CreatedAt      time.Time `json:"created_at"`
}

// CreateWallet creates a wallet; an existing one is not an error.
func (c *Client) CreateWallet(ctx context.Context, id, currency string, allowNegative bool) error {
	resp, err := c.Do(ctx, http.MethodPost, "/v1/wallets",
		map[string]any{"id": id, "currency": currency, "allow_negative": allowNegative}, nil)
	if err != nil {
		return err
	}
	if resp.Status != http.StatusCreated && resp.Status != http.StatusConflict {
		return fmt.Errorf("create wallet %s: %d %s", id, resp.Status, resp.Body)
	}
	return nil
}

// CreateLimitedWallet creates a wallet that may not go negative with limits: minBalance (≤ 0;
// below 0 needs wallets:admin) and maxBalance (nil: none). A wallet that exists already is
// no error, as for CreateWallet.
func (c *Client) CreateLimitedWallet(ctx context.Context, id, currency string, minBalance int64, maxBalance *int64) error {
	resp, err := c.Do(ctx, http.MethodPost, "/v1/wallets",
		map[string]any{"id": id, "currency": currency, "min_balance": minBalance, "max_balance": maxBalance}, nil)
	if err != nil {
		return err
	}
	if resp.Status != http.StatusCreated && resp.Status != http.StatusConflict {
		return fmt.Errorf("create wallet %s: %d %s", id, resp.Status, resp.Body)
	}
	return nil
}

// Transfer posts a transfer with the idempotency key and returns the raw response.
func (c *Client) Transfer(ctx context.Context, key string, req TransferRequest) (Response, error) {
	return c.Do(ctx, http.MethodPost, "/v1/transfers", req, map[string]string{"Idempotency-Key": key})
}
