package bus

import "github.com/nats-io/nats.go/micro"

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
