package bus

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/micro"
)

// AddService registers a micro service named name (e.g. "sovereign-browser")
// on c, so `nats micro ls|info|stats` shows it.
func (c *Conn) AddService(name, version, description string, meta map[string]string) (micro.Service, error) {
	return micro.AddService(c.nc, micro.Config{
		Name:        name,
		Version:     version,
		Description: description,
		Metadata:    meta,
	})
}

// Served waits until the server has every subscription made on c so far
// (endpoints added to a service are only buffered until then), so that a
// request from another connection made after it returns finds them. While
// the connection is reconnecting it keeps trying, for up to a minute.
func (c *Conn) Served() error {
	var err error
	for end := time.Now().Add(time.Minute); ; {
		if err = c.nc.FlushTimeout(5 * time.Second); err == nil || c.nc.IsClosed() || time.Now().After(end) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("register endpoints with the NATS server: %w", err)
	}
	return nil
}
