package kernel

import "github.com/holdfast/holdfast/contract"

// Code is a result code of the contract (contract.Code): the kernel's results speak it.
type Code = contract.Code

// Allowed reports whether verb may return code under the contract: the verb table's
// domain codes (contract.VerbInfo.Codes) and the rejection codes of its kind. Tests check
// that no verb ever returns anything else.
func Allowed(v Verb, c Code) bool { return contract.Allowed(v, c) }
