//! OpenCL events: the completion of one enqueued command, waited for, asked, profiled and
//! called back on.

use std::ptr;

use cl3::types::{cl_command_queue, cl_event, cl_int};

use super::{cl_err, error_name, info_ptr};
use crate::backend::api::{self, Callback};
use crate::backend::native::NativeEvent;
use crate::{DriverCode, Error};

/// An event: the completion of one enqueued command. Cloning retains it, dropping releases
/// it.
pub(crate) struct Event(pub(super) cl_event);
// SAFETY: OpenCL event objects may be used and released from any thread.
unsafe impl Send for Event {}
// SAFETY: as above; the calls on an event are thread-safe.
unsafe impl Sync for Event {}

impl Clone for Event {
    fn clone(&self) -> Event {
        // SAFETY: a live event, retained once for the new owner.
        unsafe {
            let _ = cl3::event::retain_event(self.0);
        }
        Event(self.0)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: each owner releases its reference once.
        unsafe {
            let _ = cl3::event::release_event(self.0);
        }
    }
}

/// Called by the driver once the command completed, with the [`Callback`] it was given.
extern "C" fn completed(_event: cl_event, _status: cl_int, data: *mut std::ffi::c_void) {
    // SAFETY: `data` is the `Box<Callback>` leaked by `on_complete`, which the driver calls
    // back exactly once.
    let done = unsafe { Box::from_raw(data.cast::<Callback>()) };
    done();
}

impl Event {
    /// The context the event belongs to: a queue waits on the device only for events of its
    /// own context.
    pub(crate) fn context(&self) -> Result<cl3::types::cl_context, Error> {
        let answer = cl3::event::get_event_info(self.0, cl3::event::CL_EVENT_CONTEXT);
        info_ptr(answer, "clGetEventInfo")
    }

    /// Whether the command completed: `CL_COMPLETE`, or a negative status (its error).
    fn status(&self) -> Result<bool, Error> {
        let status =
            cl3::event::get_event_info(self.0, cl3::event::CL_EVENT_COMMAND_EXECUTION_STATUS)
                .map_err(cl_err("clGetEventInfo"))?;
        match status {
            cl3::info_type::InfoType::Int(s) if s < 0 => Err(Error::Driver {
                call: "the enqueued command",
                code: DriverCode::OpenClStatus(s),
                error: format!(
                    "execution status {} (it, or a command it waited for, ended abnormally)",
                    error_name(s)
                ),
            }),
            cl3::info_type::InfoType::Int(s) => Ok(s == cl3::event::CL_COMPLETE),
            _ => Ok(false),
        }
    }

    /// The command queue of the event's command (null for a user event), which the event
    /// keeps alive.
    fn queue(&self) -> Result<cl_command_queue, Error> {
        info_ptr(
            cl3::event::get_event_info(self.0, cl3::event::CL_EVENT_COMMAND_QUEUE),
            "clGetEventInfo",
        )
    }
}

impl api::Event for Event {
    fn wait(&self) -> Result<(), Error> {
        cl3::event::wait_for_events(&[self.0]).map_err(cl_err("clWaitForEvents"))?;
        self.status().map(drop)
    }

    fn is_complete(&self) -> Result<bool, Error> {
        self.status()
    }

    fn profile(&self) -> Result<Option<[u64; 4]>, Error> {
        let mut times = [0u64; 4];
        let names = [
            cl3::event::CL_PROFILING_COMMAND_QUEUED,
            cl3::event::CL_PROFILING_COMMAND_SUBMIT,
            cl3::event::CL_PROFILING_COMMAND_START,
            cl3::event::CL_PROFILING_COMMAND_END,
        ];
        for (time, name) in times.iter_mut().zip(names) {
            match cl3::event::get_event_profiling_info(self.0, name) {
                Ok(cl3::info_type::InfoType::Ulong(t)) => *time = t,
                Ok(_) => return Ok(None),
                Err(cl3::error_codes::CL_PROFILING_INFO_NOT_AVAILABLE) => return Ok(None),
                Err(code) => return Err(cl_err("clGetEventProfilingInfo")(code)),
            }
        }
        Ok(Some(times))
    }

    fn on_complete(&self, done: Callback) -> Result<(), Error> {
        let data = Box::into_raw(Box::new(done));
        cl3::event::set_event_callback(self.0, cl3::event::CL_COMPLETE, completed, data.cast())
            .map_err(|code| {
                // SAFETY: the driver refused the callback, so it never takes `data`.
                drop(unsafe { Box::from_raw(data) });
                cl_err("clSetEventCallback")(code)
            })
    }

    /// A marker on the event's command queue; a user event, which has no queue, is its own.
    fn later(&self) -> Result<Event, Error> {
        let queue = self.queue()?;
        if queue.is_null() {
            return Ok(self.clone());
        }
        // SAFETY: the queue of a live event (which keeps it alive), and an empty wait list.
        unsafe { cl3::command_queue::enqueue_marker_with_wait_list(queue, 0, ptr::null()) }
            .map(Event)
            .map_err(cl_err("clEnqueueMarkerWithWaitList"))
    }

    /// A callback that drops a reference of its own: refused, the callback is dropped at
    /// once, and the reference it holds with it.
    fn release_when_complete(self) {
        let kept = self.clone();
        let _ = self.on_complete(Box::new(move || drop(kept)));
    }

    fn flush(&self) -> Result<(), Error> {
        let queue = self.queue()?;
        if queue.is_null() {
            return Ok(());
        }
        cl3::command_queue::flush(queue).map_err(cl_err("clFlush"))
    }

    fn native(&self) -> Result<NativeEvent, Error> {
        Ok(NativeEvent::OpenCl(self.0))
    }
}
