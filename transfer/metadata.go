package transfer

// RegisterExistingKey is the gRPC metadata key that makes a
// Cache.RegisterNamespace call check the caller's schema against a
// registered namespace without creating one: with the value "true", a name
// the node does not know answers ErrUnknownNamespace (FailedPrecondition).
// The SDK sends it when it resolves its namespace for a read (Lookup, Get),
// so that reading a namespace nothing was ever written to (a misspelt name)
// registers nothing; writes and Client.Register create the namespace as
// before. Nodes that do not know the key ignore it and register.
const RegisterExistingKey = "kvring-register-existing"
