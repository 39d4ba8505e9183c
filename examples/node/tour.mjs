// The README's five-minute tour of Holdfast, from Node.js: plain NATS requests with JSON
// bodies (docs/api.md; the message shapes are in docs/schema/holdfast.schema.json), then
// the tour's events read back from the HOLDFAST_EVENTS stream.
//
//   npm ci && NATS_URL=nats://127.0.0.1:4222 node tour.mjs
//
// It works in a tenant of its own (HOLDFAST_TENANT, default node-tour-<random>), so it
// can run against any server, again and again. It exits non-zero on any unexpected answer.
import { connect } from "@nats-io/transport-node";
import { jetstream } from "@nats-io/jetstream";
import { randomUUID } from "node:crypto";

const servers = process.env.NATS_URL || "nats://127.0.0.1:4222";
const prefix = process.env.HOLDFAST_PREFIX || "holdfast";
const tenant = process.env.HOLDFAST_TENANT || "node-tour-" + randomUUID().slice(0, 8);

const nc = await connect({ servers });

// call sends one request of verb (object.action) and returns the decoded reply. Writes
// carry an operation_id: a retry with the same one never executes twice.
async function call(verb, body, { write = true } = {}) {
  const req = write ? { operation_id: randomUUID(), ...body } : body;
  const msg = await nc.request(`${prefix}.v1.${tenant}.${verb}`, JSON.stringify(req), { timeout: 5000 });
  return msg.json();
}

// ok is call that insists on code "ok".
async function ok(verb, body, opts) {
  const reply = await call(verb, body, opts);
  if (reply.code !== "ok") {
    throw new Error(`${verb} ${JSON.stringify(body)}: ${reply.code}: ${reply.message || ""}`);
  }
  return reply;
}

console.log(`tenant ${tenant} on ${servers}`);

// Objects: a GPU node, its memory as a pool of units, VXLAN ids as a range.
await ok("resource.create", { resource_id: "node14/gpu0" });
await ok("pool.create", { pool_id: "node14/mem", capacity: 80 });
await ok("range.create", { range_id: "node14/vxlan", first: 1, last: 16777215 });

// One lease over all three, all or nothing. 64-bit integers come back as strings.
const reserved = await ok("lease.reserve", {
  holder_id: "sched-1",
  members: [{ resource_id: "node14/gpu0" }, { pool_id: "node14/mem", quantity: 16 }, { range_id: "node14/vxlan" }],
  ttl_ms: 30000,
});
const lease = reserved.lease;
const vni = lease.members[2].value;
console.log(`reserved lease ${lease.lease_id} epoch ${lease.lease_epoch}: vxlan ${vni}`);

// The same resource cannot be taken twice: a domain code, not an error.
const busy = await call("lease.reserve", { holder_id: "sched-2", members: [{ resource_id: "node14/gpu0" }], ttl_ms: 30000 });
if (busy.code !== "resource_busy") throw new Error(`second reserve: ${busy.code}`);
console.log("a second holder gets resource_busy");

// The fencing token is (lease_id, lease_epoch).
const fence = { holder_id: "sched-1", lease_id: lease.lease_id, lease_epoch: lease.lease_epoch };
await ok("lease.activate", fence);
const listed = await ok("lease.list", { holder_id: "sched-1" }, { write: false });
console.log(`sched-1 holds ${listed.leases.length} lease(s), ${listed.leases[0].state}`);
const looked = await ok("range.lookup", { range_id: "node14/vxlan", value: vni }, { write: false });
console.log(`vxlan ${vni} is ${looked.value_state} by lease ${looked.lease.lease_id}`);

// The operator's way out: revoke (the epoch moves: the holder is fenced out), then reclaim.
const revoked = await ok("lease.revoke", { lease_id: lease.lease_id });
const stale = await call("lease.release", fence);
if (stale.code !== "stale_epoch") throw new Error(`release with the old epoch: ${stale.code}`);
console.log(`revoked (epoch ${revoked.lease.lease_epoch}); the old fence gets stale_epoch`);
await ok("lease.reclaim", { lease_id: lease.lease_id });
await ok("resource.delete", { resource_id: "node14/gpu0" });

// Every change is an event in the HOLDFAST_EVENTS stream, on
// <prefix>.v1.<tenant>.events.<object>.<verb>, in lsn order per shard.
const js = jetstream(nc);
const consumer = await js.consumers.get("HOLDFAST_EVENTS", { filter_subjects: [`${prefix}.v1.${tenant}.events.>`] });
const want = ["resource.created", "pool.created", "range.created", "lease.reserved", "lease.activated",
  "lease.revoking", "lease.revoked", "resource.deleted"];
const seen = new Set();
const deadline = Date.now() + 10000;
while (want.some((w) => !seen.has(w)) && Date.now() < deadline) {
  const m = await consumer.next({ expires: 2000 });
  if (!m) continue;
  const ev = m.json();
  seen.add(ev.event);
  console.log(`event ${ev.event} shard ${ev.shard} lsn ${ev.lsn}`);
}
const missing = want.filter((w) => !seen.has(w));
if (missing.length > 0) throw new Error(`events not seen: ${missing.join(", ")}`);

await nc.drain();
console.log("tour done");
