package bus

// BucketName is the name of a JetStream bucket of the bus prefix:
// BucketName("sov", "_agent") is "sov_agent" ("" is "sov" too).
// Characters a bucket name cannot hold become "_".
func BucketName(prefix, suffix string) string {
	if prefix == "" {
		prefix = "sov"
	}
	b := []byte(prefix + suffix)
	for i, c := range b {
		if !(c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			b[i] = '_'
		}
	}
	return string(b)
}
