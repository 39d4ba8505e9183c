// Package messages holds the protobuf schema of the Holdfast wire contract
// (holdfast.proto), the Go code generated from it (holdfast.pb.go), the
// string constants of its enum-like fields (codes.go) and the JSON/protobuf
// codec shared by the server and the client (codec.go).
//
// # Regenerating holdfast.pb.go
//
// holdfast.pb.go is generated and committed. After editing holdfast.proto run
//
//	go generate ./messages/
//
// which needs, on PATH:
//
//   - protoc, from Debian's protobuf-compiler package
//     (apt-get install protobuf-compiler);
//   - protoc-gen-go at the version of google.golang.org/protobuf in go.mod:
//     go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//
// go test ./messages/ fails while holdfast.pb.go is stale (see stale_test.go);
// that check needs neither protoc nor protoc-gen-go.
package messages

//go:generate protoc --go_out=. --go_opt=paths=source_relative holdfast.proto
