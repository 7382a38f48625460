; The thread pool of compiled code (see codegen/cpu/pool.py, `thread_pool`): a job is a function
; and one context per piece; the calling thread and up to MAX_WORKERS detached workers claim
; pieces through one atomic counter; idle threads spin, then sleep on a futex (every wait has a
; timeout: a lost wake-up costs time, never a hang).
;
; Placeholders, each written as a dollar sign and its name in braces, substituted by
; `codegen.cpu.pool.pool_ir` (string.Template; a missing one is an error):
;   SYS_FUTEX    the futex system call number of the platform (x86-64: 202, AArch64: 98)
;   PAUSE_DECL   the declaration of the spin-wait hint intrinsic
;   PAUSE_CALL   the call of that intrinsic (x86: pause; AArch64: the yield hint)
;   SPIN_NS      initial spin time of idle workers and waiting callers, ns (SYMGRAPH_SPIN_US)
;   MAX_WORKERS  initial cap on worker threads (`POOL_MAX_WORKERS`)
;
; References: U. Drepper, "Futexes Are Tricky" (2011): the wait/wake protocol.

@busy = internal global i32 0, align 64
@gen = internal global i32 0, align 64
@sleepers = internal global i32 0, align 64
@next = internal global i64 0, align 64
@done = internal global i32 0, align 64
@waiting = internal global i32 0, align 4
@job_fn = internal global ptr null, align 64
@job_ctx = internal global ptr null, align 8
@job_stride = internal global i64 0, align 8
@job_n = internal global i64 0, align 8
@nworkers = internal global i32 0, align 64
@symgraph_pool_max_workers = global i32 ${MAX_WORKERS}, align 4
@symgraph_pool_spin_ns = global i64 ${SPIN_NS}, align 8
@symgraph_pool_yield = global i32 0, align 4
@symgraph_pool_jobs = global i64 0, align 64
@symgraph_pool_inline_jobs = global i64 0, align 8
@symgraph_pool_worker_pieces = global i64 0, align 64
@symgraph_pool_workers = global i64 0, align 8
@symgraph_pool_create_failed = global i64 0, align 8
@symgraph_pool_late_jobs = global i64 0, align 8
@symgraph_pool_wait_ns = global i64 0, align 8
@symgraph_pool_contended_jobs = global i64 0, align 8
@measure = internal global i32 0, align 4
@worker_cpu = internal global i64 0, align 8
@worker_ns = internal global i64 0, align 64
@symgraph_pool_backoff_left = global i64 0, align 8
@symgraph_pool_backoff_len = global i64 0, align 8

declare i64 @syscall(i64, ...) nounwind
declare i32 @pthread_create(ptr, ptr, ptr, ptr) nounwind
declare i32 @pthread_detach(i64) nounwind
declare i32 @pthread_sigmask(i32, ptr, ptr) nounwind
declare i32 @clock_gettime(i32, ptr) nounwind
declare i32 @sched_yield() nounwind
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
${PAUSE_DECL}

; nanoseconds of clock %clk (1: CLOCK_MONOTONIC, 3: CLOCK_THREAD_CPUTIME_ID)
define internal i64 @clock_ns(i32 %clk) nounwind {
entry:
  %ts = alloca [2 x i64], align 8
  call i32 @clock_gettime(i32 %clk, ptr %ts)
  %s = load i64, ptr %ts
  %p = getelementptr i64, ptr %ts, i64 1
  %ns = load i64, ptr %p
  %x = mul i64 %s, 1000000000
  %r = add i64 %x, %ns
  ret i64 %r
}

define internal i64 @now() nounwind {
entry:
  %r = call i64 @clock_ns(i32 1)
  ret i64 %r
}

; CPU time of the calling thread (ns) when %m, else 0 (CLOCK_THREAD_CPUTIME_ID: a system call)
define internal i64 @cpu_if(i1 %m) nounwind {
entry:
  br i1 %m, label %yes, label %no
yes:
  %r = call i64 @clock_ns(i32 3)
  ret i64 %r
no:
  ret i64 0
}

; FUTEX_WAIT_PRIVATE with a relative timeout (a lost wake-up costs at most the timeout, never a hang)
define internal void @futex_wait(ptr %addr, i32 %val, i64 %timeout_ns) nounwind {
entry:
  %ts = alloca [2 x i64], align 8
  %s = udiv i64 %timeout_ns, 1000000000
  %ns = urem i64 %timeout_ns, 1000000000
  store i64 %s, ptr %ts
  %p = getelementptr i64, ptr %ts, i64 1
  store i64 %ns, ptr %p
  %v = zext i32 %val to i64
  call i64 (i64, ...) @syscall(i64 ${SYS_FUTEX}, ptr %addr, i64 128, i64 %v, ptr %ts, ptr null, i64 0)
  ret void
}

define internal void @futex_wake(ptr %addr, i32 %n) nounwind {
entry:
  %v = zext i32 %n to i64
  call i64 (i64, ...) @syscall(i64 ${SYS_FUTEX}, ptr %addr, i64 129, i64 %v, ptr null, ptr null, i64 0)
  ret void
}

; spin (with a pause hint) while *addr == old, for at most @symgraph_pool_spin_ns; returns whether it
; changed. Every 32 pauses the thread yields its core to any other runnable thread (on a busy machine
; a spinning thread must not hold up the work it waits for, or anyone else's)
define internal i1 @spin_while_eq(ptr %addr, i32 %old) nounwind {
entry:
  %limit = load i64, ptr @symgraph_pool_spin_ns
  %t0 = call i64 @now()
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %cont], [0, %checked]
  %v = load atomic i32, ptr %addr acquire, align 4
  %eq = icmp eq i32 %v, %old
  br i1 %eq, label %pause, label %changed
pause:
  ${PAUSE_CALL}
  %i1 = add i64 %i, 1
  %chk = icmp uge i64 %i1, 32
  br i1 %chk, label %clock, label %cont
cont:
  br label %loop
clock:
  %y = load atomic i32, ptr @symgraph_pool_yield monotonic, align 4
  %doy = icmp ne i32 %y, 0
  br i1 %doy, label %yield, label %time
yield:
  call i32 @sched_yield()
  br label %time
time:
  %t = call i64 @now()
  %el = sub i64 %t, %t0
  %over = icmp uge i64 %el, %limit
  br i1 %over, label %timeout, label %checked
checked:
  br label %loop
changed:
  ret i1 1
timeout:
  ret i1 0
}

; claim and run pieces of job generation %g until none is left (workers and the caller);
; returns how many it ran; workers add the time their pieces took to @worker_ns
define internal i64 @run_pieces(i32 %g, i1 %is_worker) nounwind {
entry:
  %gz = zext i32 %g to i64
  %tag = shl i64 %gz, 32
  br label %claim
claim:
  %ran = phi i64 [0, %entry], [%ran, %cas], [%ran1, %finish], [%ran1, %lastpiece], [%ran1, %wake]
  %v = load atomic i64, ptr @next acquire, align 8
  %vt = and i64 %v, -4294967296
  %same = icmp eq i64 %vt, %tag
  br i1 %same, label %check, label %out
check:
  %idx = and i64 %v, 4294967295
  %n = load atomic i64, ptr @job_n monotonic, align 8
  %more = icmp ult i64 %idx, %n
  br i1 %more, label %cas, label %out
cas:
  %v1 = add i64 %v, 1
  %r = cmpxchg ptr @next, i64 %v, i64 %v1 acq_rel acquire
  %ok = extractvalue { i64, i1 } %r, 1
  br i1 %ok, label %run, label %claim
run:
  %fn = load atomic ptr, ptr @job_fn monotonic, align 8
  %ctx = load atomic ptr, ptr @job_ctx monotonic, align 8
  %st = load atomic i64, ptr @job_stride monotonic, align 8
  %off = mul i64 %idx, %st
  %c = getelementptr i8, ptr %ctx, i64 %off
  br i1 %is_worker, label %timed, label %plain
plain:
  call ptr %fn(ptr %c)
  br label %finish
timed:
  %mflag = load atomic i32, ptr @measure monotonic, align 4
  %mb = icmp ne i32 %mflag, 0
  %wc0 = call i64 @cpu_if(i1 %mb)
  %t0 = call i64 @now()
  call ptr %fn(ptr %c)
  %t1 = call i64 @now()
  %wc1 = call i64 @cpu_if(i1 %mb)
  %dt = sub i64 %t1, %t0
  %dc = sub i64 %wc1, %wc0
  atomicrmw add ptr @worker_ns, i64 %dt monotonic
  atomicrmw add ptr @worker_cpu, i64 %dc monotonic
  atomicrmw add ptr @symgraph_pool_worker_pieces, i64 1 monotonic
  br label %finish
finish:
  %ran1 = add i64 %ran, 1
  %d = atomicrmw add ptr @done, i32 1 seq_cst
  %d1 = add i32 %d, 1
  %n32 = trunc i64 %n to i32
  %last = icmp eq i32 %d1, %n32
  br i1 %last, label %lastpiece, label %claim
lastpiece:
  %w = load atomic i32, ptr @waiting seq_cst, align 4
  %isw = icmp ne i32 %w, 0
  br i1 %isw, label %wake, label %claim
wake:
  call void @futex_wake(ptr @done, i32 1)
  br label %claim
out:
  ret i64 %ran
}

define internal ptr @worker(ptr %arg) nounwind {
entry:
  %set = alloca [16 x i64], align 8
  call void @llvm.memset.p0.i64(ptr %set, i8 -1, i64 128, i1 false)
  call i32 @pthread_sigmask(i32 0, ptr %set, ptr null)
  %g0 = load atomic i32, ptr @gen acquire, align 4
  br label %wait
wait:
  %my = phi i32 [%g0, %entry], [%g, %work]
  %ch = call i1 @spin_while_eq(ptr @gen, i32 %my)
  br i1 %ch, label %work, label %sleep
sleep:
  atomicrmw add ptr @sleepers, i32 1 seq_cst
  call void @futex_wait(ptr @gen, i32 %my, i64 1000000000)
  atomicrmw sub ptr @sleepers, i32 1 seq_cst
  %g2 = load atomic i32, ptr @gen acquire, align 4
  %same = icmp eq i32 %g2, %my
  br i1 %same, label %sleep, label %work
work:
  %g = load atomic i32, ptr @gen acquire, align 4
  call i64 @run_pieces(i32 %g, i1 1)
  br label %wait
}

; in a forked child (no workers there): forget the parent's workers and any call it was running
define void @symgraph_pool_after_fork() nounwind {
entry:
  store i32 0, ptr @nworkers
  store i32 0, ptr @sleepers
  store i64 0, ptr @symgraph_pool_workers
  store i64 0, ptr @symgraph_pool_create_failed
  store i32 0, ptr @busy
  ret void
}

; start workers until there are %want (the caller holds @busy); a failed pthread_create stops trying
define internal void @ensure_workers(i32 %want0) nounwind {
entry:
  %tid = alloca i64, align 8
  %mx = load i32, ptr @symgraph_pool_max_workers
  %big = icmp sgt i32 %want0, %mx
  %want = select i1 %big, i32 %mx, i32 %want0
  br label %check
check:
  %nw = load i32, ptr @nworkers
  %enough = icmp sge i32 %nw, %want
  br i1 %enough, label %out, label %failed_before
failed_before:
  %cf = load i64, ptr @symgraph_pool_create_failed
  %f = icmp ne i64 %cf, 0
  br i1 %f, label %out, label %create
create:
  %rc = call i32 @pthread_create(ptr %tid, ptr null, ptr @worker, ptr null)
  %ok = icmp eq i32 %rc, 0
  br i1 %ok, label %started, label %fail
started:
  %t = load i64, ptr %tid
  call i32 @pthread_detach(i64 %t)
  %nw1 = add i32 %nw, 1
  store i32 %nw1, ptr @nworkers
  %nw64 = sext i32 %nw1 to i64
  store atomic i64 %nw64, ptr @symgraph_pool_workers monotonic, align 8
  br label %check
fail:
  store i64 1, ptr @symgraph_pool_create_failed
  br label %out
out:
  ret void
}

define internal void @run_inline(ptr %fn, ptr %ctx, i64 %stride, i64 %n) nounwind {
entry:
  %any = icmp sgt i64 %n, 0
  br i1 %any, label %loop, label %out
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %off = mul i64 %i, %stride
  %c = getelementptr i8, ptr %ctx, i64 %off
  call ptr %fn(ptr %c)
  %i1 = add i64 %i, 1
  %more = icmp slt i64 %i1, %n
  br i1 %more, label %loop, label %out
out:
  ret void
}

; run fn(ctx + i * stride) for i in [0, n) on the pool and the calling thread; returns when all are done
define void @symgraph_pool_run(ptr %fn, ptr %ctx, i64 %stride, i64 %n, i32 %nthreads) nounwind {
entry:
  %few = icmp sle i64 %n, 1
  %one = icmp sle i32 %nthreads, 1
  %serial = or i1 %few, %one
  br i1 %serial, label %inline, label %lock
lock:
  %r = cmpxchg ptr @busy, i32 0, i32 1 acquire monotonic
  %got = extractvalue { i32, i1 } %r, 1
  br i1 %got, label %check_backoff, label %inline_busy
check_backoff:
  %bl = load atomic i64, ptr @symgraph_pool_backoff_left monotonic, align 8
  %inb = icmp sgt i64 %bl, 0
  br i1 %inb, label %in_backoff, label %start
in_backoff:
  %bl1 = sub i64 %bl, 1
  store atomic i64 %bl1, ptr @symgraph_pool_backoff_left monotonic, align 8
  br label %unlock_inline
start:
  %want = sub i32 %nthreads, 1
  call void @ensure_workers(i32 %want)
  %nw = load i32, ptr @nworkers
  %none = icmp eq i32 %nw, 0
  br i1 %none, label %unlock_inline, label %post
post:
  %jn = atomicrmw add ptr @symgraph_pool_jobs, i64 1 monotonic
  %jm = and i64 %jn, 3
  %every4 = icmp eq i64 %jm, 0
  %blen = load atomic i64, ptr @symgraph_pool_backoff_len monotonic, align 8
  %probing = icmp sgt i64 %blen, 0
  %measure = or i1 %every4, %probing
  %m32 = zext i1 %measure to i32
  %g = load atomic i32, ptr @gen monotonic, align 4
  %g1 = add i32 %g, 1
  %gz = zext i32 %g1 to i64
  %tag = shl i64 %gz, 32
  %closed = or i64 %tag, 2147483647
  store atomic i64 %closed, ptr @next seq_cst, align 8
  store atomic ptr %fn, ptr @job_fn monotonic, align 8
  store atomic ptr %ctx, ptr @job_ctx monotonic, align 8
  store atomic i64 %stride, ptr @job_stride monotonic, align 8
  store atomic i64 %n, ptr @job_n monotonic, align 8
  store atomic i32 0, ptr @done monotonic, align 4
  store atomic i32 0, ptr @waiting monotonic, align 4
  store atomic i64 0, ptr @worker_ns monotonic, align 8
  store atomic i64 0, ptr @worker_cpu monotonic, align 8
  store atomic i32 %m32, ptr @measure monotonic, align 4
  %t_post = call i64 @now()
  store atomic i64 %tag, ptr @next release, align 8
  atomicrmw xchg ptr @gen, i32 %g1 seq_cst
  %sl = load atomic i32, ptr @sleepers seq_cst, align 4
  %anysl = icmp sgt i32 %sl, 0
  br i1 %anysl, label %wake, label %work
wake:
  %n32 = trunc i64 %n to i32
  %others = sub i32 %n32, 1
  %lt = icmp slt i32 %others, %nw
  %cnt = select i1 %lt, i32 %others, i32 %nw
  call void @futex_wake(ptr @gen, i32 %cnt)
  br label %work
work:
  %cc0 = call i64 @cpu_if(i1 %measure)
  %mine = call i64 @run_pieces(i32 %g1, i1 0)
  %t_mine = call i64 @now()
  %cc1 = call i64 @cpu_if(i1 %measure)
  %nn = trunc i64 %n to i32
  %d0 = load atomic i32, ptr @done acquire, align 4
  %fin0 = icmp eq i32 %d0, %nn
  br i1 %fin0, label %contention, label %spin
spin:
  %d = load atomic i32, ptr @done acquire, align 4
  %fin = icmp eq i32 %d, %nn
  br i1 %fin, label %waited, label %spinwait
spinwait:
  %changed = call i1 @spin_while_eq(ptr @done, i32 %d)
  br i1 %changed, label %spin, label %sleep
sleep:
  atomicrmw xchg ptr @waiting, i32 1 seq_cst
  br label %sleeploop
sleeploop:
  %d2 = load atomic i32, ptr @done seq_cst, align 4
  %fin2 = icmp eq i32 %d2, %nn
  br i1 %fin2, label %waited, label %dowait
dowait:
  call void @futex_wait(ptr @done, i32 %d2, i64 2000000)
  br label %sleeploop
waited:
  ; The caller waited for workers' pieces. If they ran much slower than the caller's own (a worker
  ; sharing its core with other work, or preempted: a busy machine), threads do not pay: run the
  ; next calls inline, for 8, 16, ... up to 4096 calls while this repeats. Late if
  ; worker time per piece > 1.5 x caller time per piece + 40 us.
  %t_end = call i64 @now()
  %waited_ns = sub i64 %t_end, %t_mine
  atomicrmw add ptr @symgraph_pool_wait_ns, i64 %waited_ns monotonic
  %someone = icmp sgt i64 %mine, 0
  br i1 %someone, label %judge, label %contention
judge:
  %workns = sub i64 %t_mine, %t_post
  %wns = load atomic i64, ptr @worker_ns monotonic, align 8
  %wp = sub i64 %n, %mine
  %wavg = udiv i64 %wns, %wp
  %cavg = udiv i64 %workns, %mine
  %c3 = mul i64 %cavg, 3
  %c32 = lshr i64 %c3, 1
  %lim = add i64 %c32, 40000
  %late = icmp ugt i64 %wavg, %lim
  br i1 %late, label %penalize_late, label %contention
contention:
  ; Every 4th job (and the first after inline runs) the caller and the workers also compare the CPU time their pieces got with the
  ; time the pieces took: a thread that lost more than a quarter of it (+20 us) to other threads
  ; (more runnable threads than cores: other processes, or other libraries' spinning thread pools
  ; in this process) means threads do not pay now: the same inline runs as above.
  br i1 %measure, label %cmeasure, label %unlock
cmeasure:
  %cwall = sub i64 %t_mine, %t_post
  %ccpu = sub i64 %cc1, %cc0
  %clost = sub i64 %cwall, %ccpu
  %cq = lshr i64 %cwall, 2
  %climit = add i64 %cq, 20000
  %cbad = icmp sgt i64 %clost, %climit
  %wwall = load atomic i64, ptr @worker_ns monotonic, align 8
  %wcpu = load atomic i64, ptr @worker_cpu monotonic, align 8
  %wlost = sub i64 %wwall, %wcpu
  %wq = lshr i64 %wwall, 2
  %wlimit = add i64 %wq, 20000
  %wbad = icmp sgt i64 %wlost, %wlimit
  %bad = or i1 %cbad, %wbad
  br i1 %bad, label %penalize_contended, label %good
penalize_late:
  atomicrmw add ptr @symgraph_pool_late_jobs, i64 1 monotonic
  br label %penalize
penalize_contended:
  atomicrmw add ptr @symgraph_pool_contended_jobs, i64 1 monotonic
  br label %penalize
penalize:
  %len = load atomic i64, ptr @symgraph_pool_backoff_len monotonic, align 8
  %len2 = shl i64 %len, 1
  %small = icmp slt i64 %len2, 8
  %len3 = select i1 %small, i64 8, i64 %len2
  %huge = icmp sgt i64 %len3, 4096
  %len4 = select i1 %huge, i64 4096, i64 %len3
  store atomic i64 %len4, ptr @symgraph_pool_backoff_len monotonic, align 8
  store atomic i64 %len4, ptr @symgraph_pool_backoff_left monotonic, align 8
  br label %unlock
good:
  store atomic i64 0, ptr @symgraph_pool_backoff_len monotonic, align 8
  br label %unlock
unlock:
  store atomic i32 0, ptr @busy release, align 4
  ret void
unlock_inline:
  store atomic i32 0, ptr @busy release, align 4
  br label %inline_busy
inline_busy:
  atomicrmw add ptr @symgraph_pool_inline_jobs, i64 1 monotonic
  br label %inline
inline:
  call void @run_inline(ptr %fn, ptr %ctx, i64 %stride, i64 %n)
  ret void
}
