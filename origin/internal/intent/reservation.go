package intent

import "time"

// The vocabulary of a reservation lives here, beside the intents that move
// it, because both sides of the sale speak it: checkout (Redis) and ledger
// (Postgres) already import this package and nothing else in common. A
// package of its own named "sale" would be shadowed by the sale id every
// function of both takes.

// Status is where a reservation stands. The values are the ones the Lua
// scripts write into the reservation hash, the ledger stores in its
// reservations table, and the HTTP answers carry.
type Status string

const (
	// Held: a unit is held for the account until the hold expires.
	Held Status = "held"
	// Paid: the hold was paid for; its unit is sold.
	Paid Status = "paid"
	// Expired: the hold ran out unpaid; its unit went back to available.
	Expired Status = "expired"
	// Cancelled: the hold was dropped early (the payment failed, or
	// Postgres refused the reserve).
	Cancelled Status = "cancelled"
)

// Reservation is a hold as Redis or Postgres knows it.
type Reservation struct {
	ID             string
	Sale           string
	SKU            string
	Account        string
	Status         Status
	OrderID        string // set once a payment has started
	IdempotencyKey string
	ExpiresAt      time.Time
	CreatedAt      time.Time
}

// Stock is one SKU's counters: available + held + sold = total, in Redis
// and in Postgres alike.
type Stock struct {
	Total     int64 `json:"total"`
	Available int64 `json:"available"`
	Held      int64 `json:"held"`
	Sold      int64 `json:"sold"`
}
