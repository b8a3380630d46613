module github.com/sovereign-fleet/sovereign/services/sovereign

go 1.26.8

require (
	github.com/sovereign-fleet/sovereign/proto v0.0.0
	github.com/sovereign-fleet/sovereign/services/kit v0.0.0
)

replace (
	github.com/sovereign-fleet/sovereign/proto => ../../proto
	github.com/sovereign-fleet/sovereign/services/kit => ../kit
)
