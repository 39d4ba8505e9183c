package bridge

// Routing as one stage (API §A.9 "Routing"): where a decoded, validated request goes is
// decided here, from the request and this node's view of its shard, and nowhere else.
// The decision is pure; carrying it out is forward.go's (one send to the owner, sent
// again only when nobody listens) or the shard's.

// route is where a prepared request goes.
type route uint8

const (
	// routeHere: a shard of this node (or none: a process serving every shard; or every
	// shard: listings, bulk verbs and cluster.status gather their parts themselves).
	routeHere route = iota
	// routeOwner: the owner of the request's shard, on its shard subject. The owner
	// answers the client through this node, within what is left of the request's bound.
	routeOwner
)

// routeFor decides where a request of kind goes. clustered: this node is one of a
// cluster's; forwarded: another node sent it here (its owner, as it saw it), so it is
// never sent on again — a shard that has just left answers engine_halted and the client's
// retry finds the next owner; open: this node serves the request's shard now.
func routeFor(kind opKind, clustered, forwarded, open bool) route {
	if !clustered || forwarded || open {
		return routeHere
	}
	switch kind {
	case opWrite, opRead:
		return routeOwner
	}
	return routeHere
}
