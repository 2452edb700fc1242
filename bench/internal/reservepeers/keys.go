package reservepeers

// Every Redis key this package touches; Seckill alone uses Redis. The sale
// is the hash tag, so a sale's keys would share a cluster slot.
//
//	<prefix>{seckill:<sale>}:stock:<sku>    string    units left (take.lua decrements it)

// stockKey is one SKU's counter of units left.
func stockKey(prefix, sale, sku string) string {
	return prefix + "{seckill:" + sale + "}:stock:" + sku
}
