module github.com/sovereign-fleet/sovereign/proto

go 1.26.8

tool google.golang.org/protobuf/cmd/protoc-gen-go

require google.golang.org/protobuf v1.36.12
