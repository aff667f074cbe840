#!lua name=fairgate
-- fleet_store.lua -- the fleet bucket of agent.fleet, as Redis Functions.
--
-- fairgated's grant thread loads this library (FUNCTION LOAD REPLACE, on
-- every connect) and calls one function per operation (FCALL). Every
-- figure the rules need (contract, period, floors, shares) comes in as an
-- argument from policy/fleet_grant.h, so the limits live once, in C; this
-- file owns only the store's side: the fleet bucket per tenant, the record
-- each node keeps there, and the peak windows. Time is Redis TIME, so no
-- two nodes' clocks need to agree.
--
-- Keys (the {tenant} hash tag keeps a tenant's keys in one Redis Cluster slot):
--   fg:{T}:b  hash  the fleet bucket: rate, depth, level, stamp, epoch,
--                   learn_until, charged, granted, usage, recovered
--   fg:{T}:n  hash  node -> "inc seq t_us demand rate has live idle floor"
--   fg:{T}:a  hash  node -> the last answer, replayed for a retried call
--   fg:{fleet}:n, fg:{fleet}:p, fg:{fleet}:a  the same for fg_report (peaks)
--   fg:{fleet}:o  zset  tenant -> its open peak window, while one is open
--
-- The bucket refills at the contract's rate up to its depth less what the
-- nodes hold. A node's lease is a refill rate for its local bucket; the
-- refill is charged here after the fact (the next call reports it), so
-- every unit a node admits has come out of this bucket. Units granted at
-- once come only from what is left after what nodes may have refilled
-- unreported, so the fleet admits at most what one bucket of the contract
-- would, plus what requests settle above their reservations.

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function num(s, default)
  local v = tonumber(s)
  if v == nil or v ~= v then return default end
  return v
end

local function fmt(x)
  return string.format('%.17g', x)
end

local function split(s)
  local out = {}
  for w in string.gmatch(s, '%S+') do out[#out + 1] = w end
  return out
end

-- One node's record: what it was granted and when it last spoke.
local function parse_record(s)
  local f = split(s)
  return { inc = f[1], seq = num(f[2], 0), t = num(f[3], 0), d = num(f[4], 0),
           r = num(f[5], 0), has = num(f[6], 0), live = num(f[7], 1),
           idle = f[8] == '1', floor = num(f[9], 0) }
end

local function record_string(r)
  return table.concat({ r.inc, fmt(r.seq), fmt(r.t), fmt(r.d), fmt(r.r), fmt(r.has),
                        fmt(r.live), r.idle and '1' or '0', fmt(r.floor) }, ' ')
end

-- What a record holds of the contract's rate now. Within 2T of its last
-- call the node refills at its lease; after that it has fallen back to
-- max(floor, rate / live nodes), or to its floor if it said it was idle
-- (the node side, policy/fleet_grant.c, follows the same three rules).
local function reserved_rate(rec, age_us, T_us, R)
  if age_us < 2 * T_us then return rec.r, 'lease' end
  if rec.idle then return rec.floor, 'idle' end
  return math.max(rec.floor, R / math.max(1, rec.live)), 'fallback'
end

-- What a record's node may have refilled since it last spoke: its lease
-- for the first 2T, then what it fell back to (an upper bound: a full
-- local bucket refills nothing).
local function unreported_refill(rec, rr, age_us, T_us)
  local lease_us = math.min(age_us, 2 * T_us)
  return (rec.r * lease_us + rr * math.max(0, age_us - 2 * T_us)) / 1e6
end

-- fg_grant: one node's call for one tenant.
-- KEYS: bucket, records, answers
-- ARGV: node inc seq epoch_seen rate depth period_s node_timeout_s floor
--       min_share demand rate_now refill usage want has idle ttl_s
local function fg_grant(keys, args)
  local node, inc, seq, seen = args[1], args[2], num(args[3], 0), args[4]
  local R, D = math.max(0, num(args[5], 0)), math.max(0, num(args[6], 0))
  local T_us = math.max(1000, num(args[7], 2) * 1e6)
  local X_us = math.max(3 * T_us, num(args[8], 300) * 1e6)
  local floor = math.max(0, num(args[9], 0))
  local min_share = math.max(0, num(args[10], 0))
  local demand = math.max(0, num(args[11], 0))
  local rate_now = math.max(0, num(args[12], 0))
  local refill = math.max(0, num(args[13], 0))
  local usage = math.max(0, num(args[14], 0))
  local want = math.max(0, num(args[15], 0))
  local has = num(args[16], 0)
  local idle = args[17] == '1'
  local ttl_ms = math.floor(math.max(1, num(args[18], 3600)) * 1000)
  local now = now_us()

  -- a retried call the store already answered: the same answer again
  local prev_s = redis.call('HGET', keys[2], node)
  local prev = prev_s and parse_record(prev_s) or nil
  if prev and prev.inc == inc and seq <= prev.seq then
    local ans = redis.call('HGET', keys[3], node)
    if ans then
      local a = cjson.decode(ans)
      a[9] = '1' -- replayed
      return a
    end
  end

  local b = redis.call('HMGET', keys[1], 'level', 'stamp', 'epoch', 'learn_until', 'charged',
                       'granted', 'usage', 'recovered')
  local level, stamp, epoch = num(b[1], nil), num(b[2], now), b[3]
  local learn_until, recovered = num(b[4], 0), num(b[8], 0)
  local charged, granted, used = num(b[5], 0), num(b[6], 0), num(b[7], 0)
  local fresh = false
  if level == nil or not epoch then
    -- No bucket. Either this tenant is new to the fleet, or idle so long
    -- that its keys expired (ttl_s: by then one bucket would be full
    -- again), so start full, as a single node would; or the store lost it:
    -- a node that saw an epoch within ttl_s says so. Then start empty and
    -- learn from the nodes for 2T (keep the rates they report, no units):
    -- no fresh burst.
    epoch = string.format('%d-%s', now, node)
    if seen ~= '' then
      level, learn_until, recovered = 0, now + 2 * T_us, recovered + 1
    else
      level = D
    end
    stamp, fresh = now, true
    redis.call('DEL', keys[2], keys[3])
    prev = nil
  elseif prev and prev.inc == inc and seq > prev.seq + 1 and seen == epoch then
    -- this node's record is older than its last answered call: the store
    -- came back from a snapshot. Its charges since are lost; keep no surplus.
    level = math.min(level, 0)
    learn_until, recovered = now + 2 * T_us, recovered + 1
  end

  -- the other nodes: prune the gone, sum what they hold and may have
  -- refilled since they last spoke, and what their leases reserve
  local recs = redis.call('HGETALL', keys[2])
  local others_reserved, silent_reserved, unreported, held = 0, 0, 0, 0
  local demand_sum, live = demand + min_share * R, 1
  local details = {}
  for i = 1, #recs, 2 do
    local name = recs[i]
    if name ~= node then
      local rec = parse_record(recs[i + 1])
      local age = now - rec.t
      if age > X_us then
        redis.call('HDEL', keys[2], name)
        redis.call('HDEL', keys[3], name)
      else
        local rr, state = reserved_rate(rec, age, T_us, R)
        live = live + 1
        others_reserved = others_reserved + rr
        unreported = unreported + unreported_refill(rec, rr, age, T_us)
        held = held + math.max(0, rec.has)
        if state == 'lease' then
          demand_sum = demand_sum + rec.d + min_share * R
        else
          silent_reserved = silent_reserved + rr
        end
        details[#details + 1] = table.concat({ name, fmt(rec.d), fmt(rr), fmt(age / 1e3), state }, ' ')
      end
    end
  end

  -- Refill to now. Units the nodes hold count against the depth, as they
  -- would in one bucket: the level stops at depth less what they hold
  -- (as they last reported it), so a full bucket and full nodes never make
  -- more than one bucket's burst. Refill the nodes have used and not yet
  -- reported (this call's, and what the others may have) is still to be
  -- charged: the level may stand above the stop by that much, or a long
  -- silence (Redis down while the nodes kept serving) would be charged in
  -- full against a refill cut short at the stop. A level already above
  -- the stop stays (a debt refills like any level).
  local top = D - held - math.max(0, has)
  if fresh then level = math.min(level, math.max(0, top)) end
  local stop = top + unreported + (seen == epoch and not fresh and refill or 0)
  if now > stamp and level < stop then
    level = math.min(stop, level + R * (now - stamp) / 1e6)
  end

  -- charges: what the node refilled and billed since its last answered call.
  -- Reports that belong to another epoch are not this bucket's.
  if seen == epoch and not fresh then
    level = level - refill
    charged = charged + refill
    used = used + usage
  end

  -- Debt (the store's level below what nodes may still report) is paid
  -- back over one period by lowering the rate handed out.
  local true_level = level - unreported
  local R_eff = R
  if true_level < 0 then R_eff = math.max(0, R + true_level * 1e6 / T_us) end
  local learning = now < learn_until
  local sliver = min_share * R
  local rate
  if learning then
    rate = math.min(rate_now, math.max(0, R_eff - others_reserved))
  else
    local share = (demand + sliver) / demand_sum
    rate = math.min(math.max(0, R_eff - silent_reserved) * share,
                    math.max(0, R_eff - others_reserved))
  end
  if idle then rate = math.min(rate, sliver) end
  rate = math.max(rate, sliver)

  -- units now, from what is left once every node has reported its refill
  -- (what they hold is not in the level)
  local avail = true_level
  local units = 0
  if not learning and want > 0 and avail > 0 then
    units = math.min(want, avail)
    level = level - units
    charged = charged + units
    granted = granted + units
  end

  redis.call('HSET', keys[1], 'level', fmt(level), 'stamp', fmt(now), 'epoch', epoch,
             'learn_until', fmt(learn_until), 'rate', fmt(R), 'depth', fmt(D),
             'charged', fmt(charged), 'granted', fmt(granted), 'usage', fmt(used),
             'recovered', fmt(recovered))
  local rec = { inc = inc, seq = seq, t = now, d = demand, r = rate,
                has = has + units, live = live, idle = idle, floor = floor }
  redis.call('HSET', keys[2], node, record_string(rec))
  local a = { epoch, fmt(rate), fmt(units), fmt(level), fmt(math.max(0, avail - units)),
              fmt(R_eff), live, learning and '1' or '0', '0', fresh and seen ~= '' and '1' or '0',
              fmt(demand_sum), fmt(charged), fmt(used), fmt(recovered) }
  for i = 1, #details do a[#a + 1] = details[i] end
  redis.call('HSET', keys[3], node, cjson.encode(a))
  for i = 1, 3 do redis.call('PEXPIRE', keys[i], ttl_ms) end
  return a
end

-- fg_leave: a node that stops cleanly hands back its lease for a tenant.
-- KEYS: bucket, records, answers   ARGV: node inc
local function fg_leave(keys, args)
  local s = redis.call('HGET', keys[2], args[1])
  if s and parse_record(s).inc == args[2] then
    redis.call('HDEL', keys[2], args[1])
    redis.call('HDEL', keys[3], args[1])
    return 1
  end
  return 0
end

-- Peak windows: units per fixed window of W seconds, the window's rate
-- once it closes, and the highest closed one.
local function roll(st, w, W)
  if st.win == w then return end
  if st.win >= 0 then
    local r = st.units / W
    if r > st.peak then st.peak = r end
    st.last = (st.win == w - 1) and r or 0
    st.closed = st.closed + 1
  end
  st.win, st.units = w, 0
end

local function parse_window(s)
  local f = split(s or '')
  return { win = num(f[1], -1), units = num(f[2], 0), peak = num(f[3], 0),
           last = num(f[4], 0), closed = num(f[5], 0) }
end

local function window_string(st)
  return table.concat({ fmt(st.win), fmt(st.units), fmt(st.peak), fmt(st.last), fmt(st.closed) }, ' ')
end

-- A node reports only the tenants that billed since its last report, so a
-- tenant that goes quiet leaves its last window open while the fleet's
-- closes; the fleet's peak would then count units no tenant's peak does
-- (a ratio under 1). Windows left open before w are closed here, at most
-- CLOSE_BATCH a call so one call never walks every tenant (the rest close
-- on the next calls; each tenant once per burst of activity).
local CLOSE_BATCH = 1024

local function close_quiet(peaks, open, w, W)
  local quiet = redis.call('ZRANGEBYSCORE', open, '-inf', '(' .. w, 'LIMIT', 0, CLOSE_BATCH)
  local grown = 0
  for _, t in ipairs(quiet) do
    local st = parse_window(redis.call('HGET', peaks, 'T:' .. t))
    local before = st.peak
    roll(st, w, W)
    grown = grown + (st.peak - before)
    redis.call('HSET', peaks, 'T:' .. t, window_string(st))
  end
  if #quiet > 0 then redis.call('ZREM', open, unpack(quiet)) end
  return grown
end

-- fg_report: one node's billed units since its last answered report, per
-- tenant, into fleet-wide windows; also the fleet's live nodes. The sum of
-- the tenants' peaks over the fleet's peak is the oversubscription ratio.
-- KEYS: nodes, peaks, answers, open windows
-- ARGV: node inc seq window_s node_timeout_s [tenant units]...
local function fg_report(keys, args)
  local node, inc, seq = args[1], args[2], num(args[3], 0)
  local W = math.max(0.001, num(args[4], 60))
  local X_us = num(args[5], 300) * 1e6
  local now = now_us()
  local prev_s = redis.call('HGET', keys[1], node)
  local prev = prev_s and split(prev_s) or nil
  if prev and prev[1] == inc and seq <= num(prev[2], 0) then
    local ans = redis.call('HGET', keys[3], node)
    if ans then return cjson.decode(ans) end
  end
  local w = math.floor(now / 1e6 / W)
  local all = parse_window(redis.call('HGET', keys[2], '*'))
  roll(all, w, W)
  local sum = num(redis.call('HGET', keys[2], '*sum'), 0) + close_quiet(keys[2], keys[4], w, W)
  local a = {}
  local total = 0
  for i = 6, #args - 1, 2 do
    local t, u = args[i], math.max(0, num(args[i + 1], 0))
    local st = parse_window(redis.call('HGET', keys[2], 'T:' .. t))
    local before = st.peak
    roll(st, w, W)
    st.units = st.units + u
    total = total + u
    sum = sum + (st.peak - before)
    redis.call('HSET', keys[2], 'T:' .. t, window_string(st))
    if u > 0 then redis.call('ZADD', keys[4], w, t) end
    a[#a + 1] = t
    a[#a + 1] = fmt(st.peak)
  end
  all.units = all.units + total
  redis.call('HSET', keys[2], '*', window_string(all), '*sum', fmt(sum))
  redis.call('HSET', keys[1], node, table.concat({ inc, fmt(seq), fmt(now) }, ' '))
  local nodes = redis.call('HGETALL', keys[1])
  local live = 0
  for i = 1, #nodes, 2 do
    local f = split(nodes[i + 1])
    if now - num(f[3], 0) > X_us then
      redis.call('HDEL', keys[1], nodes[i])
    else
      live = live + 1
    end
  end
  local out = { live, fmt(all.peak), fmt(all.last), all.closed, fmt(sum) }
  for i = 1, #a do out[#out + 1] = a[i] end
  redis.call('HSET', keys[3], node, cjson.encode(out))
  -- idle for a day: the peaks are history nobody reads
  for i = 1, 4 do redis.call('EXPIRE', keys[i], 86400) end
  return out
end

redis.register_function('fg_grant', fg_grant)
redis.register_function('fg_leave', fg_leave)
redis.register_function('fg_report', fg_report)
