#ifndef ICE_SIZES_P4
#define ICE_SIZES_P4

// Header stack depth of INT hop records.  A shimmed packet carries at most INT_MAX_HOPS - 1
// records (each hop refuses to push when full) so the last hop always has room for its own
// record in the feedback stack.  5 covers a three-tier Clos (leaf-agg-core-agg-leaf).
#define INT_MAX_HOPS 5

// Candidate buckets per destination leaf.  A power of two so that the bucket is a hash with a
// constant range (portable to Tofino); the controller realises path weights by how many of the
// buckets it gives each path.
#define PATH_BUCKETS 64
// log2(PATH_BUCKETS): INT sampling mixes the PSN bits above the spray bucket into the sample.
#define PATH_BUCKET_BITS 6

// Register arrays.
#define PORT_SLOTS        512
#define FLOWLET_SLOTS     4096
#define FLOW_STATE_SLOTS  4096
#define DROP_REASON_SLOTS 32

// Tables.
#define PORT_KIND_TABLE_SIZE      512
#define FLOW_PATH_TABLE_SIZE      16384
#define DST_LEAF_TABLE_SIZE       1024
#define PATH_CANDIDATE_TABLE_SIZE 16384
#define INT_POLICY_TABLE_SIZE     16
#define TAG_FORWARD_TABLE_SIZE    4096
#define IPV4_ROUTE_TABLE_SIZE     4096
#define ARP_REPLY_TABLE_SIZE      1024
#define EGRESS_PORT_TABLE_SIZE    512
#define ECN_CONFIG_TABLE_SIZE     512

#endif  // ICE_SIZES_P4
