; BLAS thread control around compiled calls (see codegen/cpu/blas.py, `blas_thread_control`).
; symgraph_blas_enter(n) makes the BLAS use n threads, saving the process setting when no other
; compiled call is running; symgraph_blas_exit(n) restores it when the last running call leaves.
; A spin lock guards the count of running calls.
;
; Placeholders, each written as a dollar sign and its name in braces, substituted by
; `codegen.cpu.blas.blas_threads_ir` (string.Template; a missing one is an error):
;   GET_THREADS  the BLAS's "get the number of threads" symbol
;   SET_THREADS  the BLAS's "set the number of threads" symbol

@lock = internal global i32 0
@active = internal global i64 0
@saved = internal global i32 0
declare i32 @${GET_THREADS}() nounwind
declare void @${SET_THREADS}(i32) nounwind
define internal void @acquire() nounwind {
entry:
  br label %spin
spin:
  %r = cmpxchg ptr @lock, i32 0, i32 1 acquire monotonic
  %ok = extractvalue { i32, i1 } %r, 1
  br i1 %ok, label %done, label %spin
done:
  ret void
}
define void @symgraph_blas_enter(i32 %n) nounwind {
entry:
  call void @acquire()
  %a = load i64, ptr @active
  %a1 = add i64 %a, 1
  store i64 %a1, ptr @active
  %first = icmp eq i64 %a, 0
  br i1 %first, label %save, label %out
save:
  %cur = call i32 @${GET_THREADS}()
  store i32 %cur, ptr @saved
  %same = icmp eq i32 %cur, %n
  br i1 %same, label %out, label %set
set:
  call void @${SET_THREADS}(i32 %n)
  br label %out
out:
  store atomic i32 0, ptr @lock release, align 4
  ret void
}
define void @symgraph_blas_exit(i32 %n) nounwind {
entry:
  call void @acquire()
  %a = load i64, ptr @active
  %a1 = sub i64 %a, 1
  store i64 %a1, ptr @active
  %last = icmp eq i64 %a1, 0
  br i1 %last, label %restore, label %out
restore:
  %s = load i32, ptr @saved
  %same = icmp eq i32 %s, %n
  br i1 %same, label %out, label %set
set:
  call void @${SET_THREADS}(i32 %s)
  br label %out
out:
  store atomic i32 0, ptr @lock release, align 4
  ret void
}
